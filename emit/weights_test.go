package emit

import (
	"bytes"
	"strings"
	"testing"
)

// TestEmbeddedWeightsEveryBackend: with Weights, every backend's program
// carries the file byte for byte beside main.go, weights.go embeds it
// (golden), and main.go hands it to the runtime; without, none of it is
// there, so programs without weights are unchanged.
func TestEmbeddedWeightsEveryBackend(t *testing.T) {
	data := []byte("not read by the emitter: compile checks the file before")
	for _, b := range Backends {
		for _, w := range []*Weights{nil, {Source: `mnist "x".safetensors`, Data: data}} {
			in := backendInput(t, b, "../models/mnist.cue", true, 0)
			in.Weights = w
			files, err := Program(in)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string][]byte{}
			for _, f := range files {
				got[f.Path] = f.Data
			}
			refers := bytes.Contains(got["main.go"], []byte("Embedded: &embeddedWeights"))
			if w == nil {
				if _, ok := got["weights.go"]; ok || refers || got[WeightsFile] != nil {
					t.Errorf("%s: a program without weights has weights.go, %s or refers to them", b.Name, WeightsFile)
				}
				continue
			}
			if !bytes.Equal(got[WeightsFile], data) || !refers {
				t.Errorf("%s: %s differs from the file, or main.go does not refer to it", b.Name, WeightsFile)
			}
			if b == CPU {
				checkGolden(t, ".", "weights.go.golden", got["weights.go"])
			} else if !bytes.Equal(got["weights.go"], mustWeightsGo(t, in)) {
				t.Errorf("%s: weights.go differs from the CPU program's", b.Name)
			}
			// The source name reaches the program only quoted, and the
			// comment only filtered.
			if !strings.Contains(string(got["weights.go"]), `Source: "mnist \"x\".safetensors"`) {
				t.Errorf("%s: weights.go does not quote the source name:\n%s", b.Name, got["weights.go"])
			}
		}
	}
}

func mustWeightsGo(t *testing.T, in *Input) []byte {
	t.Helper()
	files, err := weightsFiles(in)
	if err != nil {
		t.Fatal(err)
	}
	return files[0].Data
}
