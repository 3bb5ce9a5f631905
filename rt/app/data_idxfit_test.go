package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/rt/idx"
	"github.com/mlbuild/mlbuild/rt/imageio"
)

// writeIDX writes n rows×cols images (pixel j of image i is (i*7+j)%256)
// with labels i%3 into dir as im and lb.
func writeIDX(t *testing.T, dir string, n, rows, cols int) (im, lb string, pix []byte) {
	t.Helper()
	pix = make([]byte, n*rows*cols)
	for i := range n {
		for j := range rows * cols {
			pix[i*rows*cols+j] = byte((i*7 + j) % 256)
		}
	}
	lab := make([]byte, n)
	for i := range lab {
		lab[i] = byte(i % 3)
	}
	im, lb = filepath.Join(dir, "im"), filepath.Join(dir, "lb")
	if err := os.WriteFile(im, idx.EncodeImages(rows, cols, pix), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lb, idx.EncodeLabels(lab), 0o644); err != nil {
		t.Fatal(err)
	}
	return im, lb, pix
}

func idxMeta(shape []int, d DataSpec) *Meta {
	d.Format = "idx"
	return &Meta{InputShape: shape, Classes: 3, Data: d, Readers: []*Reader{IDXFiles}}
}

// TestIDXPadded checks that pad centres each grey image in zeros, copies it
// to the three channels and normalises each channel with its own values.
func TestIDXPadded(t *testing.T) {
	dir := t.TempDir()
	im, lb, pix := writeIDX(t, dir, 4, 2, 3)
	mean, std := []float64{0.5, 0, 0.25}, []float64{0.5, 1, 2}
	meta := idxMeta([]int{3, 4, 5}, DataSpec{Pad: true, Normalize: true, NormalizeMean: mean, NormalizeStd: std})
	ds, err := openPair(meta, im, lb)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.close()
	if ds.features != 3*4*5 {
		t.Fatalf("features %d, want 60", ds.features)
	}
	x, y := make([]float32, 2*60), make([]float32, 2*3)
	if err := ds.fill(x, y, []int{2, 1}); err != nil {
		t.Fatal(err)
	}
	for b, i := range []int{2, 1} {
		for c := range 3 {
			for r := range 4 {
				for k := range 5 {
					var v float32 // zero padding: rows 0 and 3, columns 0 and 4
					if r >= 1 && r <= 2 && k >= 1 && k <= 3 {
						v = float32(pix[i*6+(r-1)*3+(k-1)]) / 255
					}
					want := (v - float32(mean[c])) / float32(std[c])
					if got := x[b*60+c*20+r*5+k]; got != want {
						t.Fatalf("image %d channel %d pixel (%d,%d) = %v, want %v", i, c, r, k, got, want)
					}
				}
			}
		}
		if y[b*3+i%3] != 1 {
			t.Errorf("image %d: label row %v, want class %d", i, y[b*3:b*3+3], i%3)
		}
	}
}

// TestIDXResized checks that resize resamples each image with
// imageio.Resize, as image folders are.
func TestIDXResized(t *testing.T) {
	dir := t.TempDir()
	im, lb, pix := writeIDX(t, dir, 3, 4, 4)
	ds, err := openPair(idxMeta([]int{1, 7, 6}, DataSpec{Resize: true}), im, lb)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.close()
	x, y := make([]float32, 42), make([]float32, 3)
	if err := ds.fill(x, y, []int{2}); err != nil {
		t.Fatal(err)
	}
	grey := make([]float32, 16)
	for j := range grey {
		grey[j] = float32(pix[2*16+j]) / 255
	}
	want := imageio.Resize(grey, 4, 4, 7, 6)
	for j := range want {
		if x[j] != want[j] {
			t.Fatalf("pixel %d = %v, want %v", j, x[j], want[j])
		}
	}
}

// TestIDXFitErrors checks the conversions refused with a message.
func TestIDXFitErrors(t *testing.T) {
	dir := t.TempDir()
	im, lb, _ := writeIDX(t, dir, 2, 4, 4)
	for _, c := range []struct {
		shape []int
		d     DataSpec
		want  string
	}{
		{[]int{1, 3, 3}, DataSpec{Pad: true}, "pad only enlarges; use resize"},
		{[]int{3, 4, 4}, DataSpec{}, "images are 4×4 (16 values) but the model's input is"},
		{[]int{3, 4, 4}, DataSpec{Normalize: true, NormalizeMean: []float64{0}, NormalizeStd: []float64{1}}, "normalize gives 1 mean(s) and 1 deviation(s) for 3 channel(s)"},
	} {
		ds, err := openPair(idxMeta(c.shape, c.d), im, lb)
		if err == nil {
			ds.close()
			t.Errorf("%v %+v: accepted; want an error containing %q", c.shape, c.d, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), im) {
			t.Errorf("%v: error %q; want it to name %s and contain %q", c.shape, err, im, c.want)
		}
	}
}
