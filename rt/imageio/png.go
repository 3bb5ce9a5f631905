package imageio

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"strings"
)

// decodePNG decodes a PNG of any color model to luminance in [0, 1]. A
// transparent pixel is composited on black, the background of MNIST-style
// digits, which is what the premultiplied values of color.RGBA give directly.
func decodePNG(data []byte) ([]float32, int, int, error) {
	cfg, err := png.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return nil, 0, 0, pngError(err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || cfg.Width > MaxPixels/max(cfg.Height, 1) {
		return nil, 0, 0, fmt.Errorf("PNG of %dx%d pixels is larger than the %d pixels this reader accepts", cfg.Width, cfg.Height, MaxPixels)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, 0, 0, pngError(err)
	}
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	pix := make([]float32, w*h)
	switch m := img.(type) {
	case *image.Gray:
		for y := range h {
			row := m.Pix[y*m.Stride : y*m.Stride+w]
			for x, v := range row {
				pix[y*w+x] = float32(v) / 255
			}
		}
	case *image.Gray16:
		for y := range h {
			for x := range w {
				v := m.Gray16At(b.Min.X+x, b.Min.Y+y).Y
				pix[y*w+x] = float32(v) / 65535
			}
		}
	default:
		for y := range h {
			for x := range w {
				pix[y*w+x] = luminance(color.RGBA64Model.Convert(img.At(b.Min.X+x, b.Min.Y+y)).(color.RGBA64))
			}
		}
	}
	return pix, h, w, nil
}

// luminance is the Rec. 601 luma of a premultiplied color (so on black), the
// weights Go's color.GrayModel uses, in [0, 1].
func luminance(c color.RGBA64) float32 {
	y := (0.299*float64(c.R) + 0.587*float64(c.G) + 0.114*float64(c.B)) / 65535
	return float32(min(max(y, 0), 1))
}

// pngError words the decoder's errors for a user: a file cut short is said
// to be truncated.
func pngError(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return errors.New("truncated PNG: the file ends before the image data does")
	}
	var fe png.FormatError
	if errors.As(err, &fe) && strings.Contains(string(fe), "not enough pixel data") {
		return errors.New("truncated PNG: the image data ends before the last row")
	}
	if errors.As(err, &fe) {
		return fmt.Errorf("corrupt PNG: %v", err)
	}
	var ue png.UnsupportedError
	if errors.As(err, &ue) {
		return fmt.Errorf("unsupported PNG: %v", err)
	}
	return fmt.Errorf("corrupt PNG: %v", err)
}
