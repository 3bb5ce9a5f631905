package imageio

import (
	"bytes"
	"image"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"runtime"
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

// TestConfigFileReadsOnlyTheHeader: the check of an image folder's files
// costs their headers, not their pixels: a 16 MiB PGM and a PNG of 2048x2048
// are sized after allocating well under a mebibyte (decoding them takes
// 64 MiB and more).
func TestConfigFileReadsOnlyTheHeader(t *testing.T) {
	dir := t.TempDir()
	pgm := filepath.Join(dir, "big.pgm")
	os.WriteFile(pgm, append([]byte("P5 4096 4096 255\n"), make([]byte, 4096*4096)...), 0o644)
	var b bytes.Buffer
	png.Encode(&b, image.NewGray(image.Rect(0, 0, 2048, 2048)))
	pngPath := filepath.Join(dir, "big.png")
	os.WriteFile(pngPath, b.Bytes(), 0o644)
	for _, c := range []struct {
		path string
		size int
	}{{pgm, 4096}, {pngPath, 2048}} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		h, w, err := ConfigFile(c.path)
		runtime.ReadMemStats(&after)
		if err != nil || h != c.size || w != c.size {
			t.Errorf("%s: %dx%d, %v", c.path, h, w, err)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 256<<10 {
			t.Errorf("%s: the header check allocated %d bytes", c.path, got)
		}
	}
}
