package plot

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"strconv"
	"unicode"
)

// PNG writes the learning curves of run as a PNG image: the figure SVG
// draws, rasterised here with the standard library (lines and circles
// anti-aliased by their distance to each pixel, text in a 5×7 pixel font),
// for viewers and documents that take no SVG.
func PNG(w io.Writer, run *Run, title string) error {
	c := &canvas{img: image.NewRGBA(image.Rect(0, 0, width, height)), cover: make([]float32, width*height)}
	for _, s := range figure(run, title) {
		c.draw(s)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, c.img); err != nil {
		return err
	}
	// The marker, as a tEXt chunk right after the header chunk (8 bytes of
	// signature, 25 of IHDR), where IsPNGMarked looks for it.
	data := b.Bytes()
	_, err := w.Write(append(append(data[:33:33], pngMarker()...), data[33:]...))
	return err
}

// pngMarkerText is the tEXt chunk's keyword and text.
const pngMarkerText = "Software\x00mlbuild plot"

// pngMarker is the tEXt chunk PNG adds: length, type, data, CRC.
func pngMarker() []byte {
	chunk := binary.BigEndian.AppendUint32(nil, uint32(len(pngMarkerText)))
	chunk = append(chunk, "tEXt"+pngMarkerText...)
	return binary.BigEndian.AppendUint32(chunk, crc32.ChecksumIEEE(chunk[4:]))
}

// IsPNGMarked reports whether the start of a file is a PNG that PNG
// wrote: its marker chunk follows the header chunk.
func IsPNGMarked(head []byte) bool {
	m := pngMarker()
	return len(head) >= 33+len(m) && bytes.HasPrefix(head, []byte("\x89PNG\r\n\x1a\n")) && bytes.Equal(head[33:33+len(m)], m)
}

// canvas is the image being drawn and a coverage mask, so that a curve is
// blended once however many of its segments cover a pixel.
type canvas struct {
	img   *image.RGBA
	cover []float32
	dirty image.Rectangle
}

func (c *canvas) draw(s shape) {
	switch s.kind {
	case shapeRect:
		p, size := s.pts[0], s.pts[1]
		if s.fill != "" {
			for y := int(p.y); y < int(p.y+size.y); y++ {
				for x := int(p.x); x < int(p.x+size.x); x++ {
					c.mark(x, y, 1)
				}
			}
			c.paint(s.fill, opacity(s.fillOpacity))
		}
		if s.stroke != "" {
			q := pt{p.x + size.x, p.y + size.y}
			for _, seg := range [][2]pt{{p, {q.x, p.y}}, {{q.x, p.y}, q}, {q, {p.x, q.y}}, {{p.x, q.y}, p}} {
				c.segment(seg[0], seg[1], s.width, false)
			}
			c.paint(s.stroke, 1)
		}
	case shapeLine, shapePolyline:
		for i := 1; i < len(s.pts); i++ {
			c.segment(s.pts[i-1], s.pts[i], s.width, s.dashed)
		}
		c.paint(s.stroke, opacity(s.opacity))
	case shapeCircle:
		p := s.pts[0]
		for y := int(p.y - s.r - 1); y <= int(p.y+s.r+1); y++ {
			for x := int(p.x - s.r - 1); x <= int(p.x+s.r+1); x++ {
				d := math.Hypot(float64(x)+0.5-p.x, float64(y)+0.5-p.y)
				c.mark(x, y, clamp01(s.r+0.5-d))
			}
		}
		c.paint(s.fill, 1)
	case shapeText:
		c.text(s)
	}
}

// segment marks the pixels within width/2 of the segment from a to b; a
// dashed segment leaves every other 3 pixels out.
func (c *canvas) segment(a, b pt, width float64, dashed bool) {
	half := width / 2
	dx, dy := b.x-a.x, b.y-a.y
	length := math.Hypot(dx, dy)
	x0, x1 := int(math.Floor(min(a.x, b.x)-half-1)), int(math.Ceil(max(a.x, b.x)+half+1))
	y0, y1 := int(math.Floor(min(a.y, b.y)-half-1)), int(math.Ceil(max(a.y, b.y)+half+1))
	for y := y0; y <= y1; y++ {
		for x := x0; x <= x1; x++ {
			px, py := float64(x)+0.5, float64(y)+0.5
			t := 0.0
			if length > 0 {
				t = clamp01(((px-a.x)*dx + (py-a.y)*dy) / (length * length))
			}
			if dashed && math.Mod(t*length, 6) >= 3 {
				continue
			}
			d := math.Hypot(px-(a.x+t*dx), py-(a.y+t*dy))
			c.mark(x, y, clamp01(half+0.5-d))
		}
	}
}

// mark raises the coverage of a pixel.
func (c *canvas) mark(x, y int, cov float64) {
	if x < 0 || y < 0 || x >= width || y >= height || cov <= 0 {
		return
	}
	i := y*width + x
	if float32(cov) > c.cover[i] {
		c.cover[i] = float32(cov)
	}
	c.dirty = c.dirty.Union(image.Rect(x, y, x+1, y+1))
}

// paint blends the colour over the marked pixels, by their coverage times
// alpha, and clears the mask.
func (c *canvas) paint(colour string, alpha float64) {
	col := parseColour(colour)
	r := c.dirty
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			i := y*width + x
			a := float64(c.cover[i]) * alpha
			if a <= 0 {
				continue
			}
			c.cover[i] = 0
			o := c.img.RGBAAt(x, y)
			mix := func(dst, src uint8) uint8 { return uint8(math.Round(float64(dst)*(1-a) + float64(src)*a)) }
			c.img.SetRGBA(x, y, color.RGBA{mix(o.R, col.R), mix(o.G, col.G), mix(o.B, col.B), 255})
		}
	}
	c.dirty = image.Rectangle{}
}

// text draws a label in the 5×7 font, twice as large for headings,
// anchored at its baseline as SVG's text is.
func (c *canvas) text(s shape) {
	scale := 1
	if s.size >= 14 {
		scale = 2
	}
	runes := []rune(s.text)
	w := float64((len(runes)*6 - 1) * scale)
	x := s.pts[0].x
	switch s.anchor {
	case "middle":
		x -= w / 2
	case "end":
		x -= w
	}
	left, top := int(math.Round(x)), int(math.Round(s.pts[0].y))-7*scale
	for i, r := range runes {
		g, ok := glyphs[unicode.ToLower(r)]
		for row := 0; row < 7; row++ {
			for col := 0; col < 5; col++ {
				on := ok && g[row*5+col] == '#'
				if !ok { // a box for a character the font lacks
					on = row == 0 || row == 6 || col == 0 || col == 4
				}
				if !on {
					continue
				}
				for dy := 0; dy < scale; dy++ {
					for dx := 0; dx < scale; dx++ {
						c.mark(left+(i*6+col)*scale+dx, top+row*scale+dy, 1)
					}
				}
			}
		}
	}
	colour := "#000000"
	if s.fill != "" {
		colour = s.fill
	}
	c.paint(colour, 1)
}

// parseColour reads #rrggbb, and white.
func parseColour(s string) color.RGBA {
	if s == "white" {
		return color.RGBA{255, 255, 255, 255}
	}
	if len(s) == 4 { // #rgb
		s = "#" + string([]byte{s[1], s[1], s[2], s[2], s[3], s[3]})
	}
	v, err := strconv.ParseUint(s[1:], 16, 32)
	if err != nil || len(s) != 7 {
		return color.RGBA{0, 0, 0, 255}
	}
	return color.RGBA{uint8(v >> 16), uint8(v >> 8), uint8(v), 255}
}

func opacity(o float64) float64 {
	if o == 0 {
		return 1
	}
	return o
}

func clamp01(v float64) float64 { return min(max(v, 0), 1) }
