package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestCompileRefusesAnEmbeddingForTheGPU: a spec whose embedding the GPU
// backends have no kernel for is refused with exit 1 (the backend's
// limit, which the user fixes by choosing the CPU), not 70 as a bug.
func TestCompileRefusesAnEmbeddingForTheGPU(t *testing.T) {
	dir := t.TempDir()
	for _, backend := range []string{"cuda", "metal"} {
		code, out, errOut := mlbuild(t, "compile", "../../testdata/specs/valid/gpt_tiny.cue", "--backend", backend, "--target", map[string]string{"cuda": "linux/amd64", "metal": "darwin/arm64"}[backend],
			"-o", filepath.Join(dir, backend), "--cache-dir", filepath.Join(dir, "cache"))
		want := `layer "wte": layer wte: an embedding step has no GPU kernel yet: build this model for the CPU backend`
		if code != ExitInvalid || !strings.Contains(errOut, want) {
			t.Errorf("%s: exit %d (want %d), stderr lacks %q:\n%s%s", backend, code, ExitInvalid, want, out, errOut)
		}
	}
}
