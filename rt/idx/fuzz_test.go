package idx

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzIDX feeds arbitrary bytes to both parsers. They must never panic, and
// whatever they accept must be self-consistent and survive a round trip
// through the encoder. Seeds are the files in testdata/; crashers found by
// `go test -fuzz FuzzIDX` are kept in testdata/fuzz/FuzzIDX.
func FuzzIDX(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "*.idx*"))
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(header(MagicImages, 1<<20, 1<<20, 0))
	f.Add(header(MagicLabels, 0))
	f.Fuzz(func(t *testing.T, data []byte) {
		if im, err := ParseImages("fuzz", data); err == nil {
			if im.N < 0 || im.Rows <= 0 || im.Cols <= 0 || len(im.Pix) != im.N*im.Rows*im.Cols {
				t.Fatalf("inconsistent images: N=%d Rows=%d Cols=%d len(Pix)=%d", im.N, im.Rows, im.Cols, len(im.Pix))
			}
			enc := EncodeImages(im.Rows, im.Cols, im.Pix)
			if !IsGzip(data) && !bytes.Equal(enc, data) {
				t.Fatal("accepted raw images do not re-encode to the same bytes")
			}
			again, err := ParseImages("again", enc)
			if err != nil || again.N != im.N || !bytes.Equal(again.Pix, im.Pix) {
				t.Fatalf("round trip failed: %v", err)
			}
			if im.N > 0 {
				dst := make([]float32, im.Rows*im.Cols)
				im.Batch(dst, []int{im.N - 1})
				for _, v := range dst {
					if v < 0 || v > 1 {
						t.Fatalf("pixel %v outside [0, 1]", v)
					}
				}
			}
		} else if !bytes.Contains([]byte(err.Error()), []byte("fuzz: ")) {
			t.Fatalf("error %q does not name the file", err)
		}
		if lb, err := ParseLabels("fuzz", data); err == nil {
			if len(lb.Values) != lb.N {
				t.Fatalf("inconsistent labels: N=%d len(Values)=%d", lb.N, len(lb.Values))
			}
			enc := EncodeLabels(lb.Values)
			if !IsGzip(data) && !bytes.Equal(enc, data) {
				t.Fatal("accepted raw labels do not re-encode to the same bytes")
			}
			if err := lb.Check(256); err != nil {
				t.Fatalf("Check(256) failed: %v", err)
			}
			if lb.N > 0 {
				if err := lb.Check(int(lb.Values[0])); err == nil {
					t.Fatalf("Check(%d) accepted label %d", lb.Values[0], lb.Values[0])
				}
			}
		} else if !bytes.Contains([]byte(err.Error()), []byte("fuzz: ")) {
			t.Fatalf("error %q does not name the file", err)
		}
	})
}
