// Package imageio loads the images that a produced program trains on and
// classifies: PNG (any color model, transparency composited on black), JPEG
// (baseline and progressive, grey, YCbCr or CMYK) and the Netpbm formats PGM
// (P2, P5; 8 or 16 bits) and PPM (P3, P6). The format is recognised by the
// file's first bytes, never by its name. Pixels come back as float32 in
// [0, 1], channels first (all of the first channel's rows, then the
// second's), the way a model input of shape [channels, height, width] takes
// them: one luminance channel (Rec. 601 luma) or three, red, green and blue,
// whatever the file holds (a grey image gives three equal channels).
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

var (
	pngMagic  = []byte("\x89PNG\r\n\x1a\n")
	jpegMagic = []byte("\xff\xd8\xff")
)

// Load reads the image at path and returns its pixels in [0, 1] (row-major,
// one luminance value per pixel), its height and its width. Errors name the
// file and say what is wrong: not an image, a format not supported, a file
// cut short.
func Load(path string) (pix []float32, h, w int, err error) {
	return LoadChannels(path, 1)
}

// LoadChannels reads the image at path as channels planes (1: luminance,
// 3: red, green, blue), channels first, and returns them with the image's
// height and width.
func LoadChannels(path string, channels int) (pix []float32, h, w int, err error) {
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
	return DecodeChannels(path, data, channels)
}

// Decode is Load for an image already in memory; name is used in messages.
func Decode(name string, data []byte) (pix []float32, h, w int, err error) {
	return DecodeChannels(name, data, 1)
}

// DecodeChannels is LoadChannels for an image already in memory; name is
// used in messages.
func DecodeChannels(name string, data []byte, channels int) (pix []float32, h, w int, err error) {
	if channels != 1 && channels != 3 {
		return nil, 0, 0, fmt.Errorf("%s: images are read with 1 channel (grey) or 3 (RGB), not %d", name, channels)
	}
	switch {
	case bytes.HasPrefix(data, pngMagic):
		pix, h, w, err = decodePNG(data, channels)
	case bytes.HasPrefix(data, jpegMagic):
		pix, h, w, err = decodeJPEG(data, channels)
	case len(data) >= 2 && data[0] == 'P' && data[1] >= '1' && data[1] <= '7':
		pix, h, w, err = decodeNetpbm(data, channels)
	default:
		err = notAnImage(data)
	}
	if err != nil {
		return nil, 0, 0, fmt.Errorf("%s: %w", name, err)
	}
	return pix, h, w, nil
}

// IsImage reports whether data starts as one of the formats Decode reads
// (PNG, JPEG, PGM or PPM).
func IsImage(head []byte) bool {
	return bytes.HasPrefix(head, pngMagic[:4]) || bytes.HasPrefix(head, jpegMagic) ||
		len(head) >= 3 && head[0] == 'P' && (head[1] == '2' || head[1] == '3' || head[1] == '5' || head[1] == '6') && (isSpace(head[2]) || head[2] == '#')
}

// notAnImage explains data that is neither PNG nor PGM, naming common
// formats so that the fix is obvious.
func notAnImage(data []byte) error {
	has := func(p string) bool { return bytes.HasPrefix(data, []byte(p)) }
	switch {
	case len(data) == 0:
		return fmt.Errorf("empty file, not an image")
	case has("\xff\xd8"):
		return fmt.Errorf("truncated JPEG: the file ends inside its first marker")
	case has("GIF87a"), has("GIF89a"):
		return fmt.Errorf("GIF images are not supported; convert it to PNG or JPEG")
	case has("BM"):
		return fmt.Errorf("BMP images are not supported; convert it to PNG or JPEG")
	case has("RIFF") && len(data) >= 12 && string(data[8:12]) == "WEBP":
		return fmt.Errorf("WebP images are not supported; convert it to PNG or JPEG")
	case has("\x00\x00\x08\x03"):
		return fmt.Errorf("this is an IDX images file, not a single image")
	case has("\x89PN"):
		return fmt.Errorf("truncated PNG signature")
	}
	return fmt.Errorf("not a PNG, JPEG, PGM or PPM image (it starts with bytes % x)", data[:min(len(data), 8)])
}
