package npz

import (
	"archive/zip"
	"bytes"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/rt/npy"
)

// zipOf is an archive of the members name → data, deflated.
func zipOf(f *testing.F, members ...string) []byte {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for i := 0; i+1 < len(members); i += 2 {
		w, err := zw.Create(members[i])
		if err != nil {
			f.Fatal(err)
		}
		w.Write([]byte(members[i+1]))
	}
	zw.Close()
	return b.Bytes()
}

// FuzzNPZ feeds arbitrary bytes to the archive reader, asking for array
// "x" with a check that takes rows of 4 values. It must never panic,
// every error must name the archive, and an accepted array must have
// passed the check and hold exactly its shape's elements. Crashers are
// kept in testdata/fuzz/FuzzNPZ.
func FuzzNPZ(f *testing.F) {
	var arr bytes.Buffer
	npy.Encode(&arr, []int{3, 4}, make([]float32, 12))
	f.Add(zipOf(f, "x.npy", arr.String(), "y.npy", arr.String()))
	f.Add(zipOf(f, "x.npy", arr.String()+"extra bytes"))
	f.Add(zipOf(f, "x", arr.String(), "x.npy", arr.String()))
	f.Add(zipOf(f, "x.npy", arr.String()[:40]))
	f.Add([]byte("PK\x05\x06" + strings.Repeat("\x00", 18)))
	f.Fuzz(func(t *testing.T, data []byte) {
		checked := false
		a, err := Read("fuzz.npz", bytes.NewReader(data), int64(len(data)), "x", func(shape []int, size int) error {
			checked = true
			if len(shape) != 2 || shape[1] != 4 {
				return errSkip
			}
			return nil
		})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.npz") {
				t.Fatalf("error %q does not name the archive", err)
			}
			return
		}
		if !checked || len(a.Shape) != 2 || a.Shape[1] != 4 {
			t.Fatalf("accepted shape %s (checked: %v)", a.ShapeText(), checked)
		}
		n := a.Rows() * a.RowSize()
		if n > 0 {
			_ = a.At(n - 1)
		}
	})
}

type skipError struct{}

func (skipError) Error() string { return "want rows of 4 values" }

var errSkip error = skipError{}
