package npy

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzNPY feeds arbitrary bytes to the parser. It must never panic, and
// an array it accepts must be self-consistent: the data holds exactly the
// elements its shape declares, every row can be gathered, and a float32
// array re-encodes to an array with the same values. Seeds are NumPy's
// test files in testdata/; crashers found by `go test -fuzz FuzzNPY` are
// kept in testdata/fuzz/FuzzNPY.
func FuzzNPY(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "*.npy"))
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	var buf bytes.Buffer
	Encode(&buf, []int{2, 3}, []float32{1, 2, 3, 4, 5, 6})
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := Parse("fuzz.npy", data)
		if err != nil {
			return
		}
		n := 1
		for _, d := range a.Shape {
			n *= d
		}
		if len(a.data) != n*a.Dtype.Size {
			t.Fatalf("shape %v of %s but %d data bytes", a.Shape, a.Dtype.Name, len(a.data))
		}
		if n == 0 || n > 1<<16 {
			return
		}
		rows := a.Rows()
		idx := make([]int, rows)
		for i := range idx {
			idx[i] = rows - 1 - i
		}
		dst := make([]float32, rows*a.RowSize())
		a.Gather(dst, idx)
		if a.Dtype.Name == "float32" {
			var out bytes.Buffer
			shape := a.Shape
			if len(shape) == 0 {
				shape = nil
			}
			all := make([]float32, n)
			for i := range all {
				all[i] = float32(a.At(i))
			}
			if err := Encode(&out, shape, all); err != nil {
				t.Fatal(err)
			}
			b, err := Parse("again.npy", out.Bytes())
			if err != nil {
				t.Fatalf("re-encoded array does not parse: %v", err)
			}
			for i := range all {
				if x, y := b.At(i), a.At(i); x != y && !(x != x && y != y) {
					t.Fatalf("element %d: %v after the round trip, %v before", i, x, y)
				}
			}
		}
	})
}
