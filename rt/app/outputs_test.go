package app

import (
	"encoding/binary"
	"encoding/json"
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

// TestImportedWeightsNotReplaced: weights that `mlbuild import` wrote are
// not replaced by train's --out without --force (they are the default
// --out of the spec written beside them); weights a program wrote are.
func TestImportedWeightsNotReplaced(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, md map[string]string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, safetensorsHeaderOnly(t, md), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	imported := write("imported.safetensors", map[string]string{"format": "pt", "mlbuild.model": "lin", "mlbuild.source": "lin.onnx"})
	trained := write("trained.safetensors", map[string]string{"mlbuild.model": "lin"})
	if err := checkReplaceable("out", imported, false); err == nil || !strings.Contains(err.Error(), "converted from lin.onnx") || !strings.Contains(err.Error(), "--force") {
		t.Errorf("imported weights as --out: %v", err)
	}
	if err := checkReplaceable("out", imported, true); err != nil {
		t.Errorf("imported weights as --out with --force: %v", err)
	}
	if err := checkReplaceable("out", trained, false); err != nil {
		t.Errorf("a program's weights as --out: %v", err)
	}
}

// safetensorsHeaderOnly is a safetensors file with metadata md and no tensors.
func safetensorsHeaderOnly(t testing.TB, md map[string]string) []byte {
	t.Helper()
	h, err := json.Marshal(map[string]any{"__metadata__": md})
	if err != nil {
		t.Fatal(err)
	}
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(h)))
	return append(n[:], h...)
}
