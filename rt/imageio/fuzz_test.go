package imageio

import (
	"bytes"
	"image"
	"image/jpeg"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzImage feeds arbitrary bytes to the PNG, JPEG and Netpbm decoders. They must
// never panic nor allocate beyond MaxPixels, every error must name the file,
// and every accepted image must hold h*w finite values in [0, 1] that survive
// a round trip through EncodePGM (to within 8-bit quantisation) and resample
// to the MNIST input size without leaving [0, 1]. Crashers found by
// `go test -fuzz FuzzImage` are kept in testdata/fuzz/FuzzImage.
func FuzzImage(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "*.p?m"))
	seeds = append(seeds, filepath.Join("testdata", "gray.png"), filepath.Join("testdata", "alpha.png"))
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("P5 2 2 65535\n\xff\xff\x00\x00\x80\x00\x00\x01"))
	// A small colour JPEG (4:2:0) and a grey one, made here so that the
	// seeds do not depend on an encoder's version.
	for _, img := range []image.Image{image.NewRGBA(image.Rect(0, 0, 9, 7)), image.NewGray(image.Rect(0, 0, 5, 3))} {
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 80}); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		pix, h, w, err := Decode("fuzz.img", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.img: ") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if h < 1 || w < 1 || h*w > MaxPixels || len(pix) != h*w {
			t.Fatalf("accepted %dx%d with %d values", h, w, len(pix))
		}
		// The header check that image folders run on every file before
		// training passes what decodes, with the same size.
		if ch, cw, err := Config("fuzz.img", data); err != nil || ch != h || cw != w {
			t.Fatalf("decoded as %dx%d but Config says %dx%d, %v", h, w, ch, cw, err)
		}
		for _, v := range pix {
			if !(v >= 0 && v <= 1) {
				t.Fatalf("pixel %v outside [0, 1]", v)
			}
		}
		// As RGB the same file gives three planes of the same size, in
		// [0, 1], whose luma is the grey reading.
		rgb, h3, w3, err := DecodeChannels("fuzz.img", data, 3)
		if err != nil || h3 != h || w3 != w || len(rgb) != 3*h*w {
			t.Fatalf("as RGB: %v, %dx%d with %d values; grey was %dx%d", err, h3, w3, len(rgb), h, w)
		}
		n := h * w
		for i := range n {
			y := 0.299*float64(rgb[i]) + 0.587*float64(rgb[n+i]) + 0.114*float64(rgb[2*n+i])
			if math.Abs(y-float64(pix[i])) > 1e-4 {
				t.Fatalf("pixel %d: grey %v, luma of RGB %v", i, pix[i], y)
			}
		}
		again, h2, w2, err := Decode("again.pgm", EncodePGM(pix, h, w))
		if err != nil || h2 != h || w2 != w {
			t.Fatalf("round trip: %v, %dx%d became %dx%d", err, h, w, h2, w2)
		}
		for i := range pix {
			if math.Abs(float64(again[i]-pix[i])) > 0.5/255+1e-6 {
				t.Fatalf("round trip: pixel %d %v became %v", i, pix[i], again[i])
			}
		}
		if h*w <= 1<<16 { // keep each run fast; Resize has no size-dependent branches
			fit, err := Fit(pix, h, w, 28, 28, true)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range fit {
				if !(v >= 0 && v <= 1) {
					t.Fatalf("resampled pixel %v outside [0, 1]", v)
				}
			}
		}
	})
}
