package imageio

import (
	"bytes"
	"image"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigFile reads sizes from headers alone and names the file of
// each bad one: a raw PGM cut short (found from the file's size), a PNG
// whose header is cut, a file that is no image, a FIFO.
func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var pngBuf, jpgBuf bytes.Buffer
	png.Encode(&pngBuf, image.NewGray(image.Rect(0, 0, 7, 5)))
	jpeg.Encode(&jpgBuf, image.NewRGBA(image.Rect(0, 0, 9, 3)), nil)
	for _, c := range []struct {
		name string
		data []byte
		h, w int
	}{
		{"a.pgm", EncodePGM(make([]float32, 12), 3, 4), 3, 4},
		{"b.png", pngBuf.Bytes(), 5, 7},
		{"c.jpg", jpgBuf.Bytes(), 3, 9},
		{"d.pgm", []byte("P2\n# a comment\n2 1\n255\n0 255\n"), 1, 2},
	} {
		h, w, err := ConfigFile(write(c.name, c.data))
		if err != nil || h != c.h || w != c.w {
			t.Errorf("%s: %dx%d, %v; want %dx%d", c.name, h, w, err, c.h, c.w)
		}
	}
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"cut.pgm", []byte("P5 4 4 255\n\x00\x01\x02"), "truncated: a 4x4 P5 (raw PGM) image with maxval 255 needs 16 bytes of pixels, the file has 3"},
		{"cut.png", pngBuf.Bytes()[:20], "PNG"},
		{"notes.png", []byte("these are notes"), "not a PNG, JPEG, PGM or PPM image"},
		{"empty.jpg", nil, "empty file"},
	} {
		p := write(c.name, c.data)
		if _, _, err := ConfigFile(p); err == nil || !strings.HasPrefix(err.Error(), p+": ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error naming the file and saying %q", c.name, err, c.want)
		}
	}
}
