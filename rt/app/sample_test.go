package app

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSampleMakesAnInputForPredict: sample writes a test image as PNG or
// PGM and prints its label; predict on the file gives that class (the
// test model classifies its test set perfectly).
func TestSampleMakesAnInputForPredict(t *testing.T) {
	dir := trainedLin(t)
	for i, name := range []string{"s0.png", "s1.pgm", "s2.png", "s3.PNG"} {
		code, out, errOut := runLin(t, dir, "sample", "--data", "data", "--index", fmt.Sprint(i), name)
		want := fmt.Sprintf("wrote %s: test image %d of test-images (4×4), label %d\n", name, i, i%4)
		if code != 0 || out != want {
			t.Fatalf("sample %d: exit %d, printed %q, want %q\n%s", i, code, out, want, errOut)
		}
		code, out, errOut = runLin(t, dir, "predict", name, "--weights", "lin.safetensors")
		if code != 0 || !strings.Contains(out, fmt.Sprintf("%s: class %d (p=", name, i%4)) {
			t.Errorf("predict %s: exit %d, want class %d:\n%s%s", name, code, i%4, out, errOut)
		}
	}
	// An existing file is kept without --force; a wrong index is a usage error.
	os.WriteFile(filepath.Join(dir, "mine.png"), []byte("mine"), 0o644)
	if code, _, errOut := runLin(t, dir, "sample", "--data", "data", "mine.png"); code != exitFailure || !strings.Contains(errOut, "--force") {
		t.Errorf("sample over a file: exit %d: %s", code, errOut)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "mine.png")); string(b) != "mine" {
		t.Errorf("sample replaced a file without --force")
	}
	if code, _, errOut := runLin(t, dir, "sample", "--data", "data", "--force", "mine.png"); code != 0 {
		t.Errorf("sample --force: exit %d: %s", code, errOut)
	}
	if code, _, errOut := runLin(t, dir, "sample", "--data", "data", "--index", "32", "x.png"); code != exitUsage || !strings.Contains(errOut, "holds 32 (0 to 31)") {
		t.Errorf("sample --index 32: exit %d: %s", code, errOut)
	}
	if code, _, errOut := runLin(t, dir, "sample", "--train", "--data", "data", "--index", "63", "t.png"); code != 0 {
		t.Errorf("sample --train: exit %d: %s", code, errOut)
	}
}
