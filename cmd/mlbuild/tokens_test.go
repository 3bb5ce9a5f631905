package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompileGPTForTheGPU: a spec with an embedding (the tiny GPT)
// compiles for both GPU backends, exit 0, into a program whose kernels
// include the embedding's gather and its backward.
func TestCompileGPTForTheGPU(t *testing.T) {
	dir := t.TempDir()
	for _, backend := range []string{"cuda", "metal"} {
		src := filepath.Join(dir, backend+"-src")
		code, out, errOut := mlbuild(t, "compile", "../../testdata/specs/valid/gpt_tiny.cue", "--backend", backend, "--target", map[string]string{"cuda": "linux/amd64", "metal": "darwin/arm64"}[backend],
			"-o", filepath.Join(dir, backend), "--cache-dir", filepath.Join(dir, "cache"), "--emit", src)
		if code != ExitOK {
			t.Errorf("%s: exit %d, want %d:\n%s%s", backend, code, ExitOK, out, errOut)
			continue
		}
		if fi, err := os.Stat(filepath.Join(dir, backend)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: no program written: %v", backend, err)
		}
		kernels, err := os.ReadFile(filepath.Join(src, "kernels.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"_embedding(", "_embedding_bwd(", "_embedding_pos_bwd("} {
			if !strings.Contains(string(kernels), want) {
				t.Errorf("%s: kernels.go has no kernel %q", backend, want)
			}
		}
	}
}
