package npy

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

// imagesDir finds the files `make data` fetches from python3-skimage and
// writes from python3-sklearn's; the tests fail, never skip, without them.
func imagesDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("MLBUILD_IMAGES_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "data", "images")
	}
	if _, err := os.Stat(filepath.Join(dir, "lfw_subset.npy")); err != nil {
		t.Fatalf("the image data sets are not in %s: run `make data` (or set MLBUILD_IMAGES_DIR): %v", dir, err)
	}
	return dir
}

// TestSkimageArray reads lfw_subset.npy as python3-skimage ships it (the
// work of numpy.save: float64, three axes, C order) and checks it against
// what numpy 1.24 reads from it: the mean of all values, of the first and
// last image, and one element.
func TestSkimageArray(t *testing.T) {
	a, err := Open(filepath.Join(imagesDir(t), "lfw_subset.npy"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.ShapeText() != "(200, 25, 25)" || a.Dtype.Name != "float64" || a.Rows() != 200 || a.RowSize() != 625 {
		t.Fatalf("read %s of %s, %d rows of %d; want (200, 25, 25) of float64", a.ShapeText(), a.Dtype.Name, a.Rows(), a.RowSize())
	}
	mean := func(from, to int) float64 {
		var s float64
		for i := from; i < to; i++ {
			s += a.At(i)
		}
		return s / float64(to-from)
	}
	for _, c := range []struct {
		what      string
		got, want float64
	}{
		{"mean", mean(0, 200*625), 0.3771059170589177},
		{"image 0's mean", mean(0, 625), 0.41318065516352653},
		{"image 199's mean", mean(199*625, 200*625), 0.04299503321307711},
		{"[37, 12, 5]", a.At(37*625 + 12*25 + 5), 0.7215686440467823},
	} {
		if math.Abs(c.got-c.want) > 1e-12 {
			t.Errorf("%s is %v, numpy says %v", c.what, c.got, c.want)
		}
	}
	// Gather converts rows to float32 for the model.
	row := make([]float32, 625)
	a.Gather(row, []int{37})
	if row[12*25+5] != float32(0.7215686440467823) {
		t.Errorf("Gather gave %v for [37, 12, 5]", row[12*25+5])
	}
}
