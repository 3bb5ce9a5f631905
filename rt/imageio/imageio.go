// Package imageio loads the images that a produced program's predict command
// classifies: PNG (any color model, converted to luminance, transparency
// composited on black) and the Netpbm PGM formats, plain (P2, ASCII) and
// raw (P5, 8 or 16 bits). PPM (P3, P6) color images are read too and
// converted to luminance. The format is recognised by the file's first bytes,
// never by its name. Pixels come back as float32 in [0, 1], row-major, the
// way the model's input layer takes them.
//
// Fit checks an image against the model's input size and, when asked,
// resamples it; without the request a size mismatch is an error that says
// both sizes, because a silently stretched input gives confident nonsense.
//
// This package is copied into each generated program's module (it is embedded
// in the mlbuild binary), so it imports only the standard library.
package imageio

import (
	"bytes"
	"fmt"
	"os"
)

// MaxPixels bounds the size of an image that will be decoded (4096x4096).
// Headers are checked against it before any pixel memory is allocated, so a
// tiny file claiming enormous dimensions costs nothing.
const MaxPixels = 1 << 24

var pngMagic = []byte("\x89PNG\r\n\x1a\n")

// Load reads the image at path and returns its pixels in [0, 1] (row-major,
// one luminance value per pixel), its height and its width. Errors name the
// file and say what is wrong: not an image, a format not supported, a file
// cut short.
func Load(path string) (pix []float32, h, w int, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, 0, 0, err // *PathError names the file
	}
	if fi.IsDir() {
		return nil, 0, 0, fmt.Errorf("%s: is a directory, not an image", path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, 0, err
	}
	return Decode(path, data)
}

// Decode is Load for an image already in memory; name is used in messages.
func Decode(name string, data []byte) (pix []float32, h, w int, err error) {
	switch {
	case bytes.HasPrefix(data, pngMagic):
		pix, h, w, err = decodePNG(data)
	case len(data) >= 2 && data[0] == 'P' && data[1] >= '1' && data[1] <= '7':
		pix, h, w, err = decodeNetpbm(data)
	default:
		err = notAnImage(data)
	}
	if err != nil {
		return nil, 0, 0, fmt.Errorf("%s: %w", name, err)
	}
	return pix, h, w, nil
}

// notAnImage explains data that is neither PNG nor PGM, naming common
// formats so that the fix is obvious.
func notAnImage(data []byte) error {
	has := func(p string) bool { return bytes.HasPrefix(data, []byte(p)) }
	switch {
	case len(data) == 0:
		return fmt.Errorf("empty file, not an image")
	case has("\xff\xd8\xff"):
		return fmt.Errorf("JPEG images are not supported; convert it to PNG or PGM")
	case has("GIF87a"), has("GIF89a"):
		return fmt.Errorf("GIF images are not supported; convert it to PNG or PGM")
	case has("BM"):
		return fmt.Errorf("BMP images are not supported; convert it to PNG or PGM")
	case has("RIFF") && len(data) >= 12 && string(data[8:12]) == "WEBP":
		return fmt.Errorf("WebP images are not supported; convert it to PNG or PGM")
	case has("\x00\x00\x08\x03"):
		return fmt.Errorf("this is an IDX images file, not a single image")
	case has("\x89PN"):
		return fmt.Errorf("truncated PNG signature")
	}
	return fmt.Errorf("not a PNG or PGM image (it starts with bytes % x)", data[:min(len(data), 8)])
}
