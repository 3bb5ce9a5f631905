package safetensors

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"testing"
)

// FuzzSafetensors feeds arbitrary bytes to the reader. It must never panic
// nor allocate beyond what the input can back, every error must name the
// file, and whatever it accepts must survive a write and a second read
// unchanged (bit for bit, after conversion to float32). Crashers found by
// `go test -fuzz FuzzSafetensors` are kept in testdata/fuzz/FuzzSafetensors.
func FuzzSafetensors(f *testing.F) {
	f.Add(twoTensors(f))
	f.Add(handMade(`{"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},"__metadata__":{"k":"v"}}`, []byte{0, 0x3c, 1, 0x80}))
	f.Add(handMade(`{"b":{"dtype":"BF16","shape":[1],"data_offsets":[8,10]},"d":{"dtype":"F64","shape":[],"data_offsets":[0,8]}}`, make([]byte, 10)))
	f.Add(handMade(`{"a":{"dtype":"F32","shape":[0,3],"data_offsets":[0,0]}}`, nil))
	f.Add(handMade(`{}`, nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := ReadBytes("fuzz.safetensors", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.safetensors: ") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		total := 0
		for _, tn := range file.Tensors {
			n := 1
			for _, d := range tn.Shape {
				n *= d
			}
			if n != len(tn.Data) {
				t.Fatalf("tensor %q: shape %v but %d values", tn.Name, tn.Shape, len(tn.Data))
			}
			total += len(tn.Data)
		}
		if total > len(data) {
			t.Fatalf("%d values from %d bytes", total, len(data))
		}
		var buf bytes.Buffer
		if err := Encode(&buf, file.Tensors, file.Metadata); err != nil {
			// The reader accepts names the writer refuses: an
			// empty one. Nothing else may fail.
			if !strings.Contains(err.Error(), "empty name") {
				t.Fatalf("cannot write what was read: %v", err)
			}
			return
		}
		again, err := ReadBytes("again", buf.Bytes())
		if err != nil {
			t.Fatalf("cannot read what was written: %v", err)
		}
		if len(again.Tensors) != len(file.Tensors) || len(again.Metadata) != len(file.Metadata) {
			t.Fatalf("round trip changed the counts")
		}
		for k, v := range file.Metadata {
			if again.Metadata[k] != v {
				t.Fatalf("metadata %q: %q became %q", k, v, again.Metadata[k])
			}
		}
		for _, want := range file.Tensors {
			got, ok := again.Tensor(want.Name)
			if !ok || !slices.Equal(got.Shape, want.Shape) {
				t.Fatalf("tensor %q lost or reshaped", want.Name)
			}
			for i := range want.Data {
				if math.Float32bits(got.Data[i]) != math.Float32bits(want.Data[i]) {
					t.Fatalf("tensor %q[%d]: %v became %v", want.Name, i, want.Data[i], got.Data[i])
				}
			}
		}
	})
}
