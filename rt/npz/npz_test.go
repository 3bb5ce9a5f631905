package npz

import (
	"archive/zip"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/rt/csvdata"
	"github.com/mlbuild/mlbuild/rt/npy"
)

// dataDir finds a folder that `make data` fills (sklearn, images): the
// tests fail, never skip, without it.
func dataDir(t *testing.T, env, name, probe string) string {
	t.Helper()
	dir := os.Getenv(env)
	if dir == "" {
		dir = filepath.Join("..", "..", "data", name)
	}
	if _, err := os.Stat(filepath.Join(dir, probe)); err != nil {
		t.Fatalf("the data sets are not in %s: run `make data` (or set %s): %v", dir, env, err)
	}
	return dir
}

// TestNPZ reads iris's features from an archive written as numpy.savez
// does (stored and compressed entries) and refuses NumPy's object-array
// archive and a missing name.
func TestNPZ(t *testing.T) {
	skdir := dataDir(t, "MLBUILD_SKLEARN_DIR", "sklearn", "iris.csv")
	tb, err := csvdata.Read(filepath.Join(skdir, "iris.csv"), csvdata.Options{SkipRows: 1, Labels: []csvdata.Column{{Index: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	var arr bytes.Buffer
	if err := npy.Encode(&arr, []int{tb.Rows, tb.Features}, tb.X); err != nil {
		t.Fatal(err)
	}
	for _, method := range []uint16{zip.Store, zip.Deflate} {
		path := filepath.Join(t.TempDir(), "iris.npz")
		f, _ := os.Create(path)
		zw := zip.NewWriter(f)
		w, _ := zw.CreateHeader(&zip.FileHeader{Name: "x.npy", Method: method})
		w.Write(arr.Bytes())
		zw.Close()
		f.Close()
		a, err := Open(path, "x", nil)
		if err != nil {
			t.Fatal(err)
		}
		if a.ShapeText() != "(150, 4)" || float32(a.At(4)) != tb.X[4] {
			t.Errorf("method %d: %s, element 4 %v", method, a.ShapeText(), a.At(4))
		}
		if _, err := Open(path, "y", nil); err == nil || !strings.Contains(err.Error(), `the archive has no array "y"; it has x`) {
			t.Errorf("missing array: %v", err)
		}
	}
	_, err = Open(filepath.Join("..", "npy", "testdata", "py3-objarr.npz"), "x", nil)
	if err == nil || !strings.Contains(err.Error(), `py3-objarr.npz[x]: element type "|O8" is not supported`) {
		t.Errorf("object array: %v", err)
	}
	if _, err := Open(filepath.Join("..", "npy", "testdata", "python3.npy"), "x", nil); err == nil || !strings.Contains(err.Error(), "not an .npz archive") {
		t.Errorf("not a zip: %v", err)
	}
}

// TestDigitsArchive reads the digits.npz that make data writes (uint8
// images, int64 labels, deflated) and checks every value against
// python3-sklearn's digits.csv it came from.
func TestDigitsArchive(t *testing.T) {
	dir := dataDir(t, "MLBUILD_IMAGES_DIR", "images", "digits.npz")
	x, err := Open(filepath.Join(dir, "digits.npz"), "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	y, err := Open(filepath.Join(dir, "digits.npz"), "y", nil)
	if err != nil {
		t.Fatal(err)
	}
	if x.ShapeText() != "(1797, 8, 8)" || x.Dtype.Name != "uint8" || y.ShapeText() != "(1797,)" || y.Dtype.Name != "int64" {
		t.Fatalf("x %s of %s, y %s of %s", x.ShapeText(), x.Dtype.Name, y.ShapeText(), y.Dtype.Name)
	}
	skdir := os.Getenv("MLBUILD_SKLEARN_DIR")
	if skdir == "" {
		skdir = filepath.Join("..", "..", "data", "sklearn")
	}
	tb, err := csvdata.Read(filepath.Join(skdir, "digits.csv"), csvdata.Options{Labels: []csvdata.Column{{Index: -1}}})
	if err != nil {
		t.Fatalf("digits.csv (run `make data`): %v", err)
	}
	labels, err := tb.Targets()
	if err != nil {
		t.Fatal(err)
	}
	for r := range 1797 {
		for c := range 64 {
			if float32(x.At(r*64+c)) != tb.X[r*64+c] {
				t.Fatalf("sample %d pixel %d: npz %v, csv %v", r, c, x.At(r*64+c), tb.X[r*64+c])
			}
		}
		if float32(y.At(r)) != labels[r] {
			t.Fatalf("sample %d: npz label %v, csv %v", r, y.At(r), labels[r])
		}
	}
}
