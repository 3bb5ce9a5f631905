package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOutputsCheckedBeforeTraining: an --out or --checkpoint that cannot
// be written fails before the first training step (the metrics file gets
// no step), with a message naming the flag and the folder.
func TestOutputsCheckedBeforeTraining(t *testing.T) {
	dir := t.TempDir()
	writeQuadrants(t, filepath.Join(dir, "data"), 64, 32)
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "nonexistent", "dir")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--out", filepath.Join(missing, "w.safetensors")}, "--out " + filepath.Join(missing, "w.safetensors") + ": the folder " + missing + " does not exist"},
		{[]string{"--checkpoint", filepath.Join(missing, "c.safetensors")}, "--checkpoint " + filepath.Join(missing, "c.safetensors") + ": the folder " + missing + " does not exist"},
		{[]string{"--out", "notes.txt/w.safetensors"}, "--out notes.txt/w.safetensors: notes.txt is not a folder"},
	} {
		metrics := filepath.Join(dir, "m.jsonl")
		os.Remove(metrics)
		args := append([]string{"train", "--data", "data", "--epochs", "1", "--metrics", metrics, "--quiet"}, c.args...)
		code, out, errOut := runLin(t, dir, args...)
		if code != exitFailure || !strings.Contains(errOut, c.want) {
			t.Errorf("%q: exit %d (want %d), stderr lacks %q:\n%s%s", c.args, code, exitFailure, c.want, out, errOut)
		}
		if b, _ := os.ReadFile(metrics); strings.Contains(string(b), `"step"`) {
			t.Errorf("%q: training ran before the output was found unwritable", c.args)
		}
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("train created %s", missing)
	}
	// The probe leaves nothing behind.
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".probe-") || strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}
