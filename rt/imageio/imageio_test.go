package imageio

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func encodePNG(t testing.TB, img image.Image) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// grayPNG is a 3x4 (height x width) gray PNG whose pixel (y, x) is 20*(4y+x).
func grayPNG(t testing.TB) []byte {
	img := image.NewGray(image.Rect(0, 0, 4, 3))
	for i := range img.Pix {
		img.Pix[i] = byte(20 * i)
	}
	return encodePNG(t, img)
}

// alphaPNG is a 1x3 NRGBA PNG: opaque white, half-transparent pure red,
// fully transparent white.
func alphaPNG(t testing.TB) []byte {
	img := image.NewNRGBA(image.Rect(0, 0, 3, 1))
	img.SetNRGBA(0, 0, color.NRGBA{255, 255, 255, 255})
	img.SetNRGBA(1, 0, color.NRGBA{255, 0, 0, 128})
	img.SetNRGBA(2, 0, color.NRGBA{255, 255, 255, 0})
	return encodePNG(t, img)
}

const (
	plainPGM = "P2\n# a comment\n3 2 # width height\n15\n0 5 10\n15 1\n2\n"
	plainPPM = "P3 1 1 255 255 255 255"
)

// rawPGM16 is a 2x1 P5 image with maxval 1000 (two bytes per sample).
var rawPGM16 = []byte("P5 2 1 1000\n\x00\x00\x03\xe8")

// testdataFiles are the seed files kept in testdata/.
func testdataFiles(t testing.TB) map[string][]byte {
	return map[string][]byte{
		"gray.png":  grayPNG(t),
		"alpha.png": alphaPNG(t),
		"plain.pgm": []byte(plainPGM),
		"raw.pgm":   EncodePGM([]float32{0, 0.5, 1, 0.25, 0.75, 0}, 2, 3),
		"raw16.pgm": rawPGM16,
		"plain.ppm": []byte(plainPPM),
	}
}

// TestTestdata keeps testdata/ equal to the generators; MLBUILD_UPDATE=1
// rewrites it. PNGs are compared by their pixels, since the encoder's
// bytes may change between Go versions.
func TestTestdata(t *testing.T) {
	for name, want := range testdataFiles(t) {
		path := filepath.Join("testdata", name)
		if os.Getenv("MLBUILD_UPDATE") != "" {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with MLBUILD_UPDATE=1 to create it)", err)
		}
		if strings.HasSuffix(name, ".png") {
			a, _, _, err1 := Decode(name, got)
			b, _, _, err2 := Decode(name, want)
			if err1 != nil || err2 != nil || !equal(a, b) {
				t.Errorf("%s differs from its generator; run with MLBUILD_UPDATE=1", path)
			}
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from its generator; run with MLBUILD_UPDATE=1", path)
		}
	}
}

func equal(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(float64(a[i]-b[i])) > 1e-6 {
			return false
		}
	}
	return true
}

func TestLoad(t *testing.T) {
	tests := []struct {
		file string
		h, w int
		want []float32
	}{
		{"gray.png", 3, 4, func() []float32 {
			v := make([]float32, 12)
			for i := range v {
				v[i] = float32(20*i) / 255
			}
			return v
		}()},
		// Half-transparent red on black: premultiplied R = 128/255, luma 0.299 of it.
		{"alpha.png", 1, 3, []float32{1, float32(0.299 * 128 / 255), 0}},
		{"plain.pgm", 2, 3, []float32{0, 5.0 / 15, 10.0 / 15, 1, 1.0 / 15, 2.0 / 15}},
		{"raw.pgm", 2, 3, []float32{0, 128.0 / 255, 1, 64.0 / 255, 191.0 / 255, 0}},
		{"raw16.pgm", 1, 2, []float32{0, 1}},
		{"plain.ppm", 1, 1, []float32{1}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			pix, h, w, err := Load(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if h != tt.h || w != tt.w {
				t.Fatalf("size %dx%d, want %dx%d", h, w, tt.h, tt.w)
			}
			for i := range tt.want {
				if math.Abs(float64(pix[i]-tt.want[i])) > 2e-3 {
					t.Fatalf("pixels %v, want %v", pix, tt.want)
				}
			}
		})
	}
}

// TestColorModels decodes PNGs of other color models and checks them
// against the luminance formula.
func TestColorModels(t *testing.T) {
	pal := image.NewPaletted(image.Rect(0, 0, 2, 1), color.Palette{color.RGBA{0, 0, 255, 255}, color.RGBA{0, 255, 0, 255}})
	pal.Pix[1] = 1
	g16 := image.NewGray16(image.Rect(0, 0, 2, 1))
	g16.SetGray16(1, 0, color.Gray16{Y: 32768})
	rgb := image.NewRGBA(image.Rect(0, 0, 1, 1))
	rgb.SetRGBA(0, 0, color.RGBA{10, 20, 30, 255})
	tests := []struct {
		name string
		img  image.Image
		want []float32
	}{
		{"paletted", pal, []float32{0.114, 0.587}},
		{"gray16", g16, []float32{0, 32768.0 / 65535}},
		{"rgba", rgb, []float32{float32((0.299*10 + 0.587*20 + 0.114*30) / 255)}},
	}
	for _, tt := range tests {
		pix, _, _, err := Decode(tt.name, encodePNG(t, tt.img))
		if err != nil {
			t.Fatal(err)
		}
		if !equal(pix, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, pix, tt.want)
		}
	}
}

// pngWithSize returns a valid 1x1 PNG whose IHDR claims w x h pixels, with
// a correct checksum, so only the size is wrong.
func pngWithSize(t testing.TB, w, h uint32) []byte {
	b := encodePNG(t, image.NewGray(image.Rect(0, 0, 1, 1)))
	// signature (8), length (4), "IHDR" (4), width, height, ...
	binary.BigEndian.PutUint32(b[16:], w)
	binary.BigEndian.PutUint32(b[20:], h)
	binary.BigEndian.PutUint32(b[29:], crc32.ChecksumIEEE(b[12:29]))
	return b
}

func TestDecodeErrors(t *testing.T) {
	good := grayPNG(t)
	badCRC := bytes.Clone(good)
	badCRC[len(badCRC)-20] ^= 0xff
	// IHDR's compression method (byte 26) is 0, the only one PNG defines:
	// the decoder reports another as an unsupported feature, before it
	// checks the chunk's CRC.
	otherCompression := bytes.Clone(good)
	otherCompression[26] = 1
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "empty file, not an image"},
		{"text", []byte("hello world"), "not a PNG, JPEG, PGM or PPM image (it starts with bytes 68 65 6c"},
		{"jpeg header only", []byte("\xff\xd8\xff\xe0\x00\x10JFIF"), "truncated JPEG"},
		{"jpeg two bytes", []byte("\xff\xd8"), "truncated JPEG"},
		{"jpeg 12-bit", []byte("\xff\xd8\xff\xc0\x00\x0b\x0c\x00\x01\x00\x01\x01\x01\x11\x00\xff\xd9"), "unsupported JPEG: unsupported JPEG feature: precision"},
		{"png other compression", otherCompression, "unsupported PNG: png: unsupported feature: compression method"},
		{"gif", []byte("GIF89a...."), "GIF images are not supported"},
		{"bmp", []byte("BM\x00\x00"), "BMP images are not supported"},
		{"webp", []byte("RIFF\x00\x00\x00\x00WEBPVP8 "), "WebP images are not supported"},
		{"idx", []byte{0, 0, 8, 3, 0, 0, 0, 1}, "IDX images file"},
		{"png truncated", good[:len(good)-30], "truncated PNG"},
		{"png header only", good[:20], "truncated PNG"},
		{"png corrupt", badCRC, "corrupt PNG"},
		{"png huge", pngWithSize(t, 5000, 5000), "5000x5000 pixels is larger than the 16777216 pixels"},
		{"pbm", []byte("P1 1 1 1"), "P1 (PBM bitmap) images are not supported"},
		{"pam", []byte("P7\nWIDTH 1\n"), "P7 (PAM) images are not supported"},
		{"p5 glued", []byte("P5x"), "not a PNG, JPEG, PGM or PPM image"},
		{"p2 no size", []byte("P2\n"), "truncated: the file ends before the width"},
		{"p2 no maxval", []byte("P2 3 2"), "truncated: the file ends before the maxval"},
		{"p2 garbage", []byte("P2 3 x 255"), `expected height at byte 5, found 'x'`},
		{"p2 glued garbage", []byte("P2 3 2z 255"), `expected height at byte 5, found "2z"`},
		{"p2 truncated", []byte("P2 3 2 255 1 2 3"), "truncated: the P2 (plain PGM) header announces 6 samples, the file has 3"},
		{"p2 over maxval", []byte("P2 1 1 15 16"), "sample 0 is 16, more than the maxval 15"},
		{"maxval zero", []byte("P5 1 1 0\n\x00"), "maxval is 0"},
		{"maxval too big", []byte("P5 1 1 65536\n\x00\x00"), "maxval is larger than 65535"},
		{"zero width", []byte("P5 0 1 255\n"), "0x1 pixels has no pixels"},
		{"huge", []byte("P5 65536 65536 255\n"), "65536x65536 pixels is larger than the 16777216"},
		{"huge width", []byte("P5 99999999999 1 255\n"), "width is larger than"},
		{"p5 truncated", []byte("P5 28 28 255\n\x00\x00"), "truncated: a 28x28 P5 (raw PGM) image with maxval 255 needs 784 bytes of pixels, the file has 2"},
		{"p5 16-bit truncated", []byte("P5 2 1 1000\n\x00\x00\x03"), "needs 4 bytes of pixels, the file has 3"},
		{"p5 16-bit over maxval", []byte("P5 1 1 1000\n\x03\xe9"), "sample 0 is 1001, more than the maxval 1000"},
		{"p5 no pixels", []byte("P5 1 1 255"), "truncated: the file ends after the P5 (raw PGM) header"},
		{"p6 truncated", []byte("P6 1 1 255\n\x00\x00"), "needs 3 bytes of pixels, the file has 2"},
	}
	dir := t.TempDir()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-")+".img")
			os.WriteFile(path, tt.data, 0o644)
			_, _, _, err := Load(path)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.HasPrefix(err.Error(), path+": ") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q should name %s and say %q", err, path, tt.want)
			}
		})
	}
	if _, _, _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("directory: %v", err)
	}
	if _, _, _, err := Load(filepath.Join(dir, "missing.png")); err == nil || !strings.Contains(err.Error(), "missing.png") {
		t.Errorf("missing file: %v", err)
	}
}

func TestFit(t *testing.T) {
	pix := []float32{0, 1}
	same, err := Fit(pix, 1, 2, 1, 2, false)
	if err != nil || &same[0] != &pix[0] {
		t.Fatalf("same size: %v, %v", same, err)
	}
	_, err = Fit(make([]float32, 32*30), 32, 30, 28, 28, false)
	if err == nil || !strings.Contains(err.Error(), "32x30 pixels (height x width) but the model takes 28x28") || !strings.Contains(err.Error(), "--resize") {
		t.Fatalf("mismatch: %v", err)
	}
	if _, err := Fit(pix, 2, 2, 1, 1, true); err == nil || !strings.Contains(err.Error(), "2x2 pixels has 2 values") {
		t.Fatalf("wrong length: %v", err)
	}
	// Enlarging is bilinear interpolation between pixel centres, edges clamped.
	up, err := Fit(pix, 1, 2, 1, 4, true)
	if err != nil || !equal(up, []float32{0, 0.25, 0.75, 1}) {
		t.Fatalf("1x2 -> 1x4: %v, %v", up, err)
	}
	// 2x2 to 3x3: the centre is the mean of the four corners.
	sq, _ := Fit([]float32{0, 1, 1, 0}, 2, 2, 3, 3, true)
	if math.Abs(float64(sq[4])-0.5) > 1e-6 || sq[0] != 0 || sq[2] != 1 {
		t.Fatalf("2x2 -> 3x3: %v", sq)
	}
}

// TestResizeShrink checks that shrinking keeps a constant image constant,
// keeps the mean of a pattern, and lets every source pixel count.
func TestResizeShrink(t *testing.T) {
	const n = 280
	flat := make([]float32, n*n)
	stripes := make([]float32, n*n)
	for i := range flat {
		flat[i] = 0.6
		if (i%n)%10 == 3 { // a thin vertical line every 10 pixels
			stripes[i] = 1
		}
	}
	for _, v := range Resize(flat, n, n, 28, 28) {
		if math.Abs(float64(v)-0.6) > 1e-5 {
			t.Fatalf("constant image changed to %v", v)
		}
	}
	small := Resize(stripes, n, n, 28, 28)
	var sum float64
	for _, v := range small {
		if v <= 0 {
			t.Fatalf("a 1-pixel line every 10 pixels vanished at 28x28: %v", small[:28])
		}
		sum += float64(v)
	}
	if mean := sum / float64(len(small)); math.Abs(mean-0.1) > 0.01 {
		t.Fatalf("mean %v, want about 0.1", mean)
	}
}

func TestEncodePGMRoundTrip(t *testing.T) {
	pix := []float32{0, 0.2, 0.4, 0.6, 0.8, 1}
	got, h, w, err := Decode("rt.pgm", EncodePGM(pix, 3, 2))
	if err != nil || h != 3 || w != 2 {
		t.Fatalf("%v %dx%d", err, h, w)
	}
	for i := range pix {
		if math.Abs(float64(got[i]-pix[i])) > 0.5/255+1e-6 {
			t.Fatalf("got %v, want %v", got, pix)
		}
	}
}

// TestEncodeGrayPNG: Go's PNG decoder reads the stored PNG back exactly,
// for an image of one pixel, a digit, and one whose data takes several
// stored blocks; so does LoadChannels.
func TestEncodeGrayPNG(t *testing.T) {
	for _, size := range [][2]int{{1, 1}, {28, 28}, {301, 257}} {
		w, h := size[0], size[1]
		pix := make([]byte, w*h)
		for i := range pix {
			pix[i] = byte(i*7 + i/w)
		}
		data := EncodeGrayPNG(pix, w, h)
		img, err := png.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%d×%d: %v", w, h, err)
		}
		g, ok := img.(*image.Gray)
		if !ok || g.Rect.Dx() != w || g.Rect.Dy() != h || !bytes.Equal(g.Pix, pix) {
			t.Fatalf("%d×%d: decoded %T %v, pixels equal %v", w, h, img, img.Bounds(), ok && bytes.Equal(g.Pix, pix))
		}
		got, gh, gw, err := DecodeChannels("x.png", data, 1)
		if err != nil || gh != h || gw != w || got[len(got)-1] != float32(pix[len(pix)-1])/255 {
			t.Fatalf("%d×%d: DecodeChannels %d×%d, %v", w, h, gh, gw, err)
		}
	}
}
