package imageio

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"io"
	"strings"
)

// decodePNG decodes a PNG of any color model to channels planes in [0, 1].
// A transparent pixel is composited on black, the background of
// MNIST-style digits, which is what the premultiplied values of color.RGBA
// give directly.
func decodePNG(data []byte, channels int) ([]float32, int, int, error) {
	img, err := decodeRegistered("PNG", "png", data, pngError)
	if err != nil {
		return nil, 0, 0, err
	}
	pix, h, w := planes(img, channels)
	return pix, h, w, nil
}

// decodeJPEG decodes a JPEG (grey, YCbCr or CMYK; baseline or progressive)
// to channels planes in [0, 1], with the YCbCr to RGB conversion of the
// JPEG File Interchange Format that Go's image/color implements.
func decodeJPEG(data []byte, channels int) ([]float32, int, int, error) {
	img, err := decodeRegistered("JPEG", "jpeg", data, jpegError)
	if err != nil {
		return nil, 0, 0, err
	}
	pix, h, w := planes(img, channels)
	return pix, h, w, nil
}

// decodeRegistered decodes a PNG or a JPEG with the standard library's
// image/png or image/jpeg, through package image's registry of formats,
// which those packages join when a program imports them. This package
// does not import them, so that the programs of models that take no
// images (CSV, npy) do not carry the decoders: image/png's init registers
// its decoder, so importing it links all of it (with image/jpeg, 147,456
// bytes of the program of models/mnist.cue). The emitter imports both in
// the main.go of every program that reads images (rt/app's Images and
// ImageFolder readers), and so do this package's tests. The header is
// decoded first and the size checked before any pixel is; word turns the
// decoder's errors into the messages users see. format is the name in
// messages, name the one the decoder registers (and its package's).
func decodeRegistered(format, name string, data []byte, word func(error) error) (image.Image, error) {
	cfg, got, err := image.DecodeConfig(bytes.NewReader(data))
	if errors.Is(err, image.ErrFormat) || err == nil && got != name {
		return nil, fmt.Errorf("this program cannot decode %s images: it was built without image/%s (a bug in mlbuild)", format, name)
	}
	if err != nil {
		return nil, word(err)
	}
	if err := checkSize(format, cfg.Width, cfg.Height); err != nil {
		return nil, err
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, word(err)
	}
	return img, nil
}

// checkSize refuses images beyond MaxPixels before their pixels are
// decoded, so that a small file claiming a huge size costs nothing.
func checkSize(format string, w, h int) error {
	if w <= 0 || h <= 0 || w > MaxPixels/max(h, 1) {
		return fmt.Errorf("%s of %dx%d pixels is larger than the %d pixels this reader accepts", format, w, h, MaxPixels)
	}
	return nil
}

// planes converts a decoded image to channels planes in [0, 1], channels
// first: luminance for one channel, red, green and blue for three.
func planes(img image.Image, channels int) ([]float32, int, int) {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	n := w * h
	pix := make([]float32, channels*n)
	switch m := img.(type) {
	case *image.Gray: // grey PNGs and JPEGs: every channel is the grey value
		for y := range h {
			row := m.Pix[y*m.Stride : y*m.Stride+w]
			for x, v := range row {
				for c := range channels {
					pix[c*n+y*w+x] = float32(v) / 255
				}
			}
		}
	case *image.YCbCr: // colour JPEGs, without an interface call per pixel
		for y := range h {
			for x := range w {
				yi, ci := m.YOffset(b.Min.X+x, b.Min.Y+y), m.COffset(b.Min.X+x, b.Min.Y+y)
				r, g, bl := color.YCbCrToRGB(m.Y[yi], m.Cb[ci], m.Cr[ci])
				put8(pix, channels, n, y*w+x, r, g, bl)
			}
		}
	case *image.RGBA: // premultiplied, so already on black
		for y := range h {
			row := m.Pix[y*m.Stride : y*m.Stride+4*w]
			for x := range w {
				put8(pix, channels, n, y*w+x, row[4*x], row[4*x+1], row[4*x+2])
			}
		}
	default:
		for y := range h {
			for x := range w {
				c := color.RGBA64Model.Convert(img.At(b.Min.X+x, b.Min.Y+y)).(color.RGBA64)
				i := y*w + x
				if channels == 1 {
					pix[i] = luminance(c)
					continue
				}
				pix[i] = float32(c.R) / 65535
				pix[n+i] = float32(c.G) / 65535
				pix[2*n+i] = float32(c.B) / 65535
			}
		}
	}
	return pix, h, w
}

// put8 stores one 8-bit RGB pixel at i of the planes: as luminance for one
// channel, else as red, green and blue.
func put8(pix []float32, channels, n, i int, r, g, b uint8) {
	if channels == 1 {
		pix[i] = luma(float64(r), float64(g), float64(b), 255)
		return
	}
	pix[i] = float32(r) / 255
	pix[n+i] = float32(g) / 255
	pix[2*n+i] = float32(b) / 255
}

// luminance is the Rec. 601 luma of a premultiplied color (so on black), the
// weights Go's color.GrayModel uses, in [0, 1].
func luminance(c color.RGBA64) float32 {
	return luma(float64(c.R), float64(c.G), float64(c.B), 65535)
}

// luma is the Rec. 601 luma of r, g, b out of maxval, in [0, 1].
func luma(r, g, b, maxval float64) float32 {
	y := (0.299*r + 0.587*g + 0.114*b) / maxval
	return float32(min(max(y, 0), 1))
}

// The messages of image/png's and image/jpeg's FormatError and
// UnsupportedError, by which pngError and jpegError tell them apart without
// importing those packages (their types would link them).
const (
	pngFormatError       = "png: invalid format: "
	pngUnsupportedError  = "png: unsupported feature: "
	jpegFormatError      = "invalid JPEG format: "
	jpegUnsupportedError = "unsupported JPEG feature: "
)

// pngError words the decoder's errors for a user: a file cut short is said
// to be truncated.
func pngError(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return errors.New("truncated PNG: the file ends before the image data does")
	}
	msg := err.Error()
	if strings.HasPrefix(msg, pngFormatError) && strings.Contains(msg, "not enough pixel data") {
		return errors.New("truncated PNG: the image data ends before the last row")
	}
	if strings.HasPrefix(msg, pngUnsupportedError) {
		return fmt.Errorf("unsupported PNG: %v", err)
	}
	return fmt.Errorf("corrupt PNG: %v", err)
}

// jpegError words the JPEG decoder's errors as pngError does.
func jpegError(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return errors.New("truncated JPEG: the file ends before the image data does")
	}
	msg := err.Error()
	if strings.HasPrefix(msg, jpegFormatError) && strings.Contains(msg, "short") {
		return fmt.Errorf("truncated JPEG: %v", err)
	}
	if strings.HasPrefix(msg, jpegUnsupportedError) {
		return fmt.Errorf("unsupported JPEG: %v", err)
	}
	return fmt.Errorf("corrupt JPEG: %v", err)
}
