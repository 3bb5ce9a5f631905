package emit

import (
	"regexp"
	"strings"
	"testing"
)

var tokenLayerField = regexp.MustCompile(`\bTokenLayer: +"wte",`)

// TestGPTProgramsForTheGPU: the GPT specs (models/gpt.cue, the Moby-Dick
// benchmark's spec and the tiny test GPT) make programs for both GPU
// backends, each with the embedding's gather and backward kernels and
// the TokenLayer by which the host names a bad id.
func TestGPTProgramsForTheGPU(t *testing.T) {
	for _, file := range []string{"../models/gpt.cue", "../testdata/text/gpt_moby.cue", "../testdata/specs/valid/gpt_tiny.cue"} {
		for _, b := range []*Backend{Metal, CUDA} {
			files, err := b.program(backendInput(t, b, file, true, 0))
			if err != nil {
				t.Errorf("%s for %s: %v", file, b.Name, err)
				continue
			}
			text := map[string]string{}
			for _, f := range files {
				text[f.Path] = string(f.Data)
			}
			if !tokenLayerField.MatchString(text["main.go"]) {
				t.Errorf("%s for %s: main.go names no token layer", file, b.Name)
			}
			for _, want := range []string{"_embedding(", "_embedding_bwd(", "_embedding_pos_bwd("} {
				if !strings.Contains(text["kernels.go"], want) {
					t.Errorf("%s for %s: kernels.go has no kernel %q", file, b.Name, want)
				}
			}
		}
	}
}
