package imageio

import (
	"fmt"
	"math"
)

// Fit returns pix (h x w) as an image of the model's input size toH x toW.
// When the sizes agree it returns pix itself. Otherwise, with resize false
// it returns an error that gives both sizes (the caller adds the file name);
// with resize true it resamples with Resize.
func Fit(pix []float32, h, w, toH, toW int, resize bool) ([]float32, error) {
	return FitChannels(pix, 1, h, w, toH, toW, resize)
}

// FitChannels is Fit for channels planes of h x w (channels first), each
// resampled on its own.
func FitChannels(pix []float32, channels, h, w, toH, toW int, resize bool) ([]float32, error) {
	if channels < 1 || len(pix) != channels*h*w {
		return nil, fmt.Errorf("image of %d channel(s) of %dx%d pixels has %d values", channels, h, w, len(pix))
	}
	if h == toH && w == toW {
		return pix, nil
	}
	if !resize {
		return nil, fmt.Errorf("the image is %dx%d pixels (height x width) but the model takes %dx%d; resize it, or pass --resize to resample it", h, w, toH, toW)
	}
	if toH <= 0 || toW <= 0 || h <= 0 || w <= 0 {
		return nil, fmt.Errorf("cannot resample %dx%d pixels to %dx%d", h, w, toH, toW)
	}
	out := make([]float32, 0, channels*toH*toW)
	rs := newResampler(h, w, toH, toW) // the filter weights, once for every plane
	for c := range channels {
		out = append(out, rs.resize(pix[c*h*w:(c+1)*h*w])...)
	}
	return out, nil
}

// Resize resamples an h x w image to toH x toW with a separable triangle
// (tent) filter. Enlarging, it is exactly bilinear interpolation between
// pixel centres; shrinking, the tent widens with the scale so that every
// source pixel contributes (plain bilinear sampling would skip most pixels
// of a 280x280 drawing and alias its strokes away). This is the filter of
// Pillow's Image.resize with BILINEAR, and so of torchvision's Resize on
// PIL images (antialiased).
func Resize(pix []float32, h, w, toH, toW int) []float32 {
	return newResampler(h, w, toH, toW).resize(pix)
}

// resampler holds the tent filter's taps for one change of size, which
// every channel of an image shares.
type resampler struct {
	h, w, toH, toW int
	cols, rows     [][]tap
}

func newResampler(h, w, toH, toW int) *resampler {
	return &resampler{h, w, toH, toW, tentWeights(w, toW), tentWeights(h, toH)}
}

func (r *resampler) resize(pix []float32) []float32 {
	h, w, toW := r.h, r.w, r.toW
	rows := make([]float32, h*toW) // horizontal pass: h x toW
	for y := range h {
		src := pix[y*w : (y+1)*w]
		for x, taps := range r.cols {
			var s float32
			for _, t := range taps {
				s += t.weight * src[t.index]
			}
			rows[y*toW+x] = s
		}
	}
	out := make([]float32, r.toH*toW) // vertical pass
	for y, taps := range r.rows {
		dst := out[y*toW : (y+1)*toW]
		for _, t := range taps {
			src := rows[t.index*toW : (t.index+1)*toW]
			for x := range dst {
				dst[x] += t.weight * src[x]
			}
		}
	}
	for i, v := range out {
		out[i] = min(max(v, 0), 1)
	}
	return out
}

type tap struct {
	index  int
	weight float32
}

// tentWeights gives, for each of the to output positions along one axis, the
// source pixels and normalised weights of a tent filter of radius
// max(1, from/to) centred on the output pixel's centre in source
// coordinates.
func tentWeights(from, to int) [][]tap {
	scale := float64(from) / float64(to)
	radius := max(scale, 1)
	out := make([][]tap, to)
	for i := range out {
		centre := (float64(i)+0.5)*scale - 0.5
		lo := max(int(math.Ceil(centre-radius)), 0)
		hi := min(int(math.Floor(centre+radius)), from-1)
		var taps []tap
		var sum float64
		for j := lo; j <= hi; j++ {
			wgt := 1 - math.Abs(float64(j)-centre)/radius
			if wgt <= 0 {
				continue
			}
			taps = append(taps, tap{j, float32(wgt)})
			sum += wgt
		}
		if len(taps) == 0 { // centre outside the image: take the nearest edge
			taps = []tap{{min(max(int(math.Round(centre)), 0), from-1), 1}}
			sum = 1
		}
		for k := range taps {
			taps[k].weight = float32(float64(taps[k].weight) / sum)
		}
		out[i] = taps
	}
	return out
}

// EncodePGM returns pix (h x w, values in [0, 1]) as a raw 8-bit PGM (P5)
// file, the simplest image every tool opens. Values outside [0, 1] are
// clamped. Tests and the demo use it to write inputs for predict.
func EncodePGM(pix []float32, h, w int) []byte {
	out := fmt.Appendf(nil, "P5\n%d %d\n255\n", w, h)
	for _, v := range pix[:h*w] {
		out = append(out, byte(math.Round(float64(min(max(v, 0), 1))*255)))
	}
	return out
}
