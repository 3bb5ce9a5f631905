package imageio

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// imagesDir finds the photographs of Debian's python3-skimage and
// python3-sklearn that `make data` fetches; the tests fail, never skip,
// without them.
func imagesDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("MLBUILD_IMAGES_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "data", "images")
	}
	if _, err := os.Stat(filepath.Join(dir, "china.jpg")); err != nil {
		t.Fatalf("the photographs are not in %s: run `make data` (or set MLBUILD_IMAGES_DIR): %v", dir, err)
	}
	return dir
}

// pillow holds what Pillow 9.4 (Debian's python3-pil) reads from each
// photograph: the mean of each channel (R, G, B) in [0, 1] over the whole
// image, and over the image resized to 32x24 with Image.BILINEAR, and two
// pixels (row 10, column 7 and row 20, column 30) of the resized one:
//
//	im = Image.open(f).convert("RGB"); a = np.asarray(im) / 255
//	r = np.asarray(im.resize((32, 24), Image.BILINEAR)) / 255
//
// JPEG decoders may differ by a grey level here and there (the IDCT is not
// specified exactly), and Pillow rounds its resized pixels to 8 bits, so
// the comparisons allow a little.
var pillow = []struct {
	file       string
	h, w       int
	mean       [3]float64
	small      [3]float64
	px10, px20 [3]float64
}{
	{"china.jpg", 427, 640, [3]float64{0.56753, 0.57047, 0.55262}, [3]float64{0.56754, 0.5705, 0.55271}, [3]float64{0.2235, 0.2, 0.1804}, [3]float64{0.0667, 0.0824, 0.0353}},
	{"flower.jpg", 427, 640, [3]float64{0.21621, 0.28855, 0.22353}, [3]float64{0.216, 0.28847, 0.22366}, [3]float64{0.0039, 0.2824, 0.3333}, [3]float64{0.0039, 0.2784, 0.3412}},
	{"rocket.jpg", 427, 640, [3]float64{0.20496, 0.24037, 0.32263}, [3]float64{0.20486, 0.24035, 0.32266}, [3]float64{0.2039, 0.2902, 0.4471}, [3]float64{0.2039, 0.1882, 0.1804}},
	{"coffee.png", 400, 600, [3]float64{0.62184, 0.33645, 0.2019}, [3]float64{0.62206, 0.33647, 0.20195}, [3]float64{0.6588, 0.1647, 0.0588}, [3]float64{0.6549, 0.3373, 0.1608}},
	{"chelsea.png", 300, 451, [3]float64{0.57911, 0.43704, 0.34038}, [3]float64{0.57913, 0.43691, 0.34028}, [3]float64{0.5725, 0.3843, 0.2314}, [3]float64{0.7333, 0.6471, 0.6235}},
}

func planeMeans(pix []float32, channels, n int) []float64 {
	out := make([]float64, channels)
	for c := range channels {
		for _, v := range pix[c*n : (c+1)*n] {
			out[c] += float64(v)
		}
		out[c] /= float64(n)
	}
	return out
}

// TestPhotographsAgreeWithPillow reads real JPEG and PNG photographs as
// RGB planes and as grey, and resizes them, and compares with Pillow.
func TestPhotographsAgreeWithPillow(t *testing.T) {
	dir := imagesDir(t)
	for _, p := range pillow {
		t.Run(p.file, func(t *testing.T) {
			pix, h, w, err := LoadChannels(filepath.Join(dir, p.file), 3)
			if err != nil {
				t.Fatal(err)
			}
			if h != p.h || w != p.w || len(pix) != 3*h*w {
				t.Fatalf("read %dx%d with %d values, want %dx%d", h, w, len(pix), p.h, p.w)
			}
			for c, m := range planeMeans(pix, 3, h*w) {
				if math.Abs(m-p.mean[c]) > 0.5/255 {
					t.Errorf("channel %d mean %.5f, Pillow %.5f", c, m, p.mean[c])
				}
			}
			small, err := FitChannels(pix, 3, h, w, 24, 32, true)
			if err != nil {
				t.Fatal(err)
			}
			for c, m := range planeMeans(small, 3, 24*32) {
				if math.Abs(m-p.small[c]) > 0.5/255 {
					t.Errorf("resized: channel %d mean %.5f, Pillow %.5f", c, m, p.small[c])
				}
			}
			for c := range 3 {
				for _, px := range []struct {
					y, x int
					want float64
				}{{10, 7, p.px10[c]}, {20, 30, p.px20[c]}} {
					if got := float64(small[c*24*32+px.y*32+px.x]); math.Abs(got-px.want) > 2.5/255 {
						t.Errorf("resized: channel %d pixel (%d, %d) is %.4f, Pillow %.4f", c, px.y, px.x, got, px.want)
					}
				}
			}
			// Grey is the Rec. 601 luma of the same pixels.
			grey, gh, gw, err := Load(filepath.Join(dir, p.file))
			if err != nil || gh != h || gw != w {
				t.Fatalf("grey: %dx%d, %v", gh, gw, err)
			}
			n := h * w
			for _, i := range []int{0, n / 3, n / 2, n - 1} {
				want := 0.299*pix[i] + 0.587*pix[n+i] + 0.114*pix[2*n+i]
				if math.Abs(float64(grey[i]-want)) > 1e-5 {
					t.Errorf("grey pixel %d is %v, the luma of its RGB is %v", i, grey[i], want)
				}
			}
		})
	}
}

// TestGreyPhotographAsRGB reads a grey JPEG (a face of lfw_subset written by
// make data) as three channels: each is the grey image.
func TestGreyPhotographAsRGB(t *testing.T) {
	path := filepath.Join(imagesDir(t), "faces", "face", "lfw000.jpg")
	grey, h, w, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	rgb, h3, w3, err := LoadChannels(path, 3)
	if err != nil || h3 != h || w3 != w || h != 25 || w != 25 {
		t.Fatalf("%dx%d and %dx%d, %v; want 25x25", h, w, h3, w3, err)
	}
	for c := range 3 {
		for i, v := range grey {
			if rgb[c*h*w+i] != v {
				t.Fatalf("channel %d pixel %d is %v, the grey value %v", c, i, rgb[c*h*w+i], v)
			}
		}
	}
}

// TestTruncatedJPEG reads scikit-image's truncated.jpg (a real JPEG cut
// short) and photographs cut short here: each is an error that names the
// file and says it is truncated.
func TestTruncatedJPEG(t *testing.T) {
	dir := imagesDir(t)
	path := filepath.Join(dir, "truncated.jpg")
	for _, ch := range []int{1, 3} {
		_, _, _, err := LoadChannels(path, ch)
		if err == nil || !strings.HasPrefix(err.Error(), path+": ") || !strings.Contains(err.Error(), "truncated JPEG") {
			t.Errorf("%s as %d channel(s): %v, want an error naming it and saying truncated JPEG", path, ch, err)
		}
	}
	whole, err := os.ReadFile(filepath.Join(dir, "rocket.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{3, 100, len(whole) / 2, len(whole) - 2} {
		_, _, _, err := DecodeChannels("rocket-cut.jpg", whole[:n], 3)
		if err == nil || !strings.HasPrefix(err.Error(), "rocket-cut.jpg: ") || !strings.Contains(err.Error(), "JPEG") {
			t.Errorf("rocket.jpg cut to %d bytes: %v, want an error about the JPEG", n, err)
		}
	}
}

// TestChannelCount refuses channel counts other than grey and RGB.
func TestChannelCount(t *testing.T) {
	for _, ch := range []int{0, 2, 4} {
		_, _, _, err := LoadChannels(filepath.Join(imagesDir(t), "coffee.png"), ch)
		if err == nil || !strings.Contains(err.Error(), "1 channel (grey) or 3 (RGB)") {
			t.Errorf("%d channels: %v", ch, err)
		}
	}
}
