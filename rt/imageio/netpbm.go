package imageio

import (
	"fmt"
)

// netpbmFormat describes one Netpbm magic number.
type netpbmFormat struct {
	name     string // "P5 (raw PGM)"
	channels int    // 1 for gray, 3 for color
	plain    bool   // ASCII samples instead of binary
}

var netpbmFormats = map[byte]netpbmFormat{
	'2': {"P2 (plain PGM)", 1, true},
	'5': {"P5 (raw PGM)", 1, false},
	'3': {"P3 (plain PPM)", 3, true},
	'6': {"P6 (raw PPM)", 3, false},
}

// netpbmReader walks a Netpbm file: header tokens separated by whitespace
// and '#' comments, then samples.
type netpbmReader struct {
	data []byte
	pos  int
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// skip passes whitespace and comments, which run from '#' to the end of the
// line.
func (r *netpbmReader) skip() {
	for r.pos < len(r.data) {
		c := r.data[r.pos]
		switch {
		case isSpace(c):
			r.pos++
		case c == '#':
			for r.pos < len(r.data) && r.data[r.pos] != '\n' && r.data[r.pos] != '\r' {
				r.pos++
			}
		default:
			return
		}
	}
}

// number reads one decimal number of at most limit; what names it in errors.
// It reports io-style truncation separately so the message can say so.
func (r *netpbmReader) number(what string, limit int) (int, error) {
	r.skip()
	if r.pos >= len(r.data) {
		return 0, errTruncated{what}
	}
	start := r.pos
	v := 0
	for r.pos < len(r.data) && r.data[r.pos] >= '0' && r.data[r.pos] <= '9' {
		v = v*10 + int(r.data[r.pos]-'0')
		if v > limit {
			return 0, fmt.Errorf("%s is larger than %d", what, limit)
		}
		r.pos++
	}
	if r.pos == start {
		return 0, fmt.Errorf("expected %s at byte %d, found %q", what, start, r.data[start])
	}
	if r.pos < len(r.data) && !isSpace(r.data[r.pos]) && r.data[r.pos] != '#' {
		return 0, fmt.Errorf("expected %s at byte %d, found %q", what, start, r.data[start:r.pos+1])
	}
	return v, nil
}

// errTruncated is the end of the file where a number was expected.
type errTruncated struct{ what string }

func (e errTruncated) Error() string { return "truncated: the file ends before the " + e.what }

// maxDimension bounds a width or a height on its own; MaxPixels bounds the
// product.
const maxDimension = MaxPixels

// netpbmHeader reads and checks the header of a P2, P5, P3 or P6 image:
// its format, width, height and maxval, and a reader at the end of the
// maxval.
func netpbmHeader(data []byte) (format netpbmFormat, r *netpbmReader, w, h, maxval int, err error) {
	format, ok := netpbmFormats[data[1]]
	if !ok {
		switch data[1] {
		case '1', '4':
			err = fmt.Errorf("P%c (PBM bitmap) images are not supported; convert it to PGM or PNG", data[1])
		default:
			err = fmt.Errorf("P%c (PAM) images are not supported; convert it to PGM or PNG", data[1])
		}
		return
	}
	if len(data) > 2 && !isSpace(data[2]) && data[2] != '#' {
		err = notAnImage(data)
		return
	}
	r = &netpbmReader{data: data, pos: 2}
	if w, err = r.number("width", maxDimension); err != nil {
		return
	}
	if h, err = r.number("height", maxDimension); err != nil {
		return
	}
	if maxval, err = r.number("maxval", 65535); err != nil {
		return
	}
	switch {
	case w == 0 || h == 0:
		err = fmt.Errorf("%s image of %dx%d pixels has no pixels", format.name, w, h)
	case w > MaxPixels/h:
		err = fmt.Errorf("%s image of %dx%d pixels is larger than the %d pixels this reader accepts", format.name, w, h, MaxPixels)
	case maxval == 0:
		err = fmt.Errorf("%s maxval is 0; it must be 1 to 65535", format.name)
	}
	return
}

// decodeNetpbm decodes P2, P5, P3 and P6 images to channels planes in
// [0, 1].
func decodeNetpbm(data []byte, channels int) ([]float32, int, int, error) {
	format, r, w, h, maxval, err := netpbmHeader(data)
	if err != nil {
		return nil, 0, 0, err
	}
	samples := w * h * format.channels
	var raw []int
	if format.plain {
		raw, err = plainSamples(r, samples, maxval, format)
	} else {
		raw, err = binarySamples(r, samples, maxval, format, w, h)
	}
	if err != nil {
		return nil, 0, 0, err
	}
	n := w * h
	pix := make([]float32, channels*n)
	scale := 1 / float64(maxval)
	for i := range n {
		if format.channels == 1 {
			for c := range channels {
				pix[c*n+i] = float32(float64(raw[i]) * scale)
			}
			continue
		}
		s := raw[3*i : 3*i+3]
		if channels == 1 {
			pix[i] = luma(float64(s[0]), float64(s[1]), float64(s[2]), float64(maxval))
			continue
		}
		for c := range 3 {
			pix[c*n+i] = float32(min(float64(s[c])*scale, 1))
		}
	}
	return pix, h, w, nil
}

// plainSamples reads ASCII samples. The slice grows with the samples
// actually present, so a header that lies about the size costs nothing.
func plainSamples(r *netpbmReader, n, maxval int, format netpbmFormat) ([]int, error) {
	out := make([]int, 0, min(n, len(r.data)/2+1))
	for len(out) < n {
		v, err := r.number("sample", 1<<30)
		if _, short := err.(errTruncated); short {
			return nil, fmt.Errorf("truncated: the %s header announces %d samples, the file has %d", format.name, n, len(out))
		}
		if err != nil {
			return nil, err
		}
		if v > maxval {
			return nil, fmt.Errorf("sample %d is %d, more than the maxval %d", len(out), v, maxval)
		}
		out = append(out, v)
	}
	return out, nil
}

// binarySamples reads raw samples: one byte each when maxval < 256, two
// big-endian bytes otherwise. Exactly one whitespace byte separates the
// header from them. Data after the image (Netpbm allows several images per
// file) is ignored.
func binarySamples(r *netpbmReader, n, maxval int, format netpbmFormat, w, h int) ([]int, error) {
	if r.pos >= len(r.data) {
		return nil, fmt.Errorf("truncated: the file ends after the %s header", format.name)
	}
	if !isSpace(r.data[r.pos]) {
		return nil, fmt.Errorf("%s: expected one whitespace byte between maxval and the pixels, found %q", format.name, r.data[r.pos])
	}
	r.pos++
	bytesPer := 1
	if maxval >= 256 {
		bytesPer = 2
	}
	have := len(r.data) - r.pos
	if need := n * bytesPer; have < need {
		return nil, fmt.Errorf("truncated: a %dx%d %s image with maxval %d needs %d bytes of pixels, the file has %d", w, h, format.name, maxval, need, have)
	}
	src := r.data[r.pos:]
	out := make([]int, n)
	for i := range out {
		v := int(src[i])
		if bytesPer == 2 {
			v = int(src[2*i])<<8 | int(src[2*i+1])
		}
		if v > maxval {
			return nil, fmt.Errorf("sample %d is %d, more than the maxval %d", i, v, maxval)
		}
		out[i] = v
	}
	return out, nil
}
