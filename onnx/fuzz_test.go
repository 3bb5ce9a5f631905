package onnx

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to the decoder, starting from real models
// of ONNX's test suite. It must never panic, every error must be a
// *DecodeError, and every tensor it accepts must hold exactly the values
// its shape asks for, no more than the input could carry. Whatever decodes
// is then imported, which must not panic either and must give layers or
// an error. Crashers found by `go test -fuzz FuzzDecode` are kept in
// testdata/fuzz/FuzzDecode.
func FuzzDecode(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("..", "testdata", "onnx", "*.onnx"))
	torch, _ := filepath.Glob(filepath.Join("..", "testdata", "onnx", "torch", "*_opset1[37].onnx"))
	files = append(files, torch...)
	if err != nil || len(files) < 10 {
		f.Fatalf("no seed models in testdata/onnx: %v", err)
	}
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add(externalModel("../x.bin"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(data)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %T (%v) is not a *DecodeError", err, err)
			}
			return
		}
		var tensors []*Tensor
		tensors = append(tensors, m.Graph.Initializers...)
		for _, n := range m.Graph.Nodes {
			for _, a := range n.Attrs {
				if a.T != nil {
					tensors = append(tensors, a.T)
				}
			}
		}
		for _, tn := range tensors {
			if tn.External != nil {
				continue
			}
			n := tn.NumElements()
			if n > int64(len(data)) {
				t.Fatalf("tensor %q: %d elements from %d bytes", tn.Name, n, len(data))
			}
			if v, err := tn.Float32s(); err == nil && int64(len(v)) != n {
				t.Fatalf("tensor %q: %d values for %d elements", tn.Name, len(v), n)
			}
		}
		im, err := Import(m)
		if err == nil && len(im.Layers) == 0 {
			t.Fatalf("import succeeded with no layers")
		}
		if err == nil {
			im.Spec("fuzz", "fuzz.onnx", "fuzz.safetensors")
			im.Weights()
		}
	})
}
