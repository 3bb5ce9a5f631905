package plot

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Marker is the second line of every SVG file SVG writes, where `mlbuild
// plot` looks to know that it may replace a file without --force.
const Marker = "<!-- written by mlbuild plot -->"

// SVG writes the learning curves of run as an SVG document titled title.
func SVG(w io.Writer, run *Run, title string) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	b.WriteString(Marker + "\n")
	group := ""
	for _, s := range figure(run, title) {
		if s.group != group {
			if group != "" {
				b.WriteString("</g>\n")
			}
			if s.group != "" {
				fmt.Fprintf(&b, `<g class="%s">`+"\n", esc(s.group))
			}
			group = s.group
		}
		writeSVGShape(&b, s)
	}
	if group != "" {
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
	_, err := w.Write(b.Bytes())
	return err
}

// writeSVGShape writes one shape as an SVG element.
func writeSVGShape(b *bytes.Buffer, s shape) {
	paint := ""
	if s.stroke != "" {
		paint += fmt.Sprintf(` stroke="%s"`, s.stroke)
		if s.width != 1 {
			paint += fmt.Sprintf(` stroke-width="%s"`, num(s.width))
		}
		if s.opacity != 0 {
			paint += fmt.Sprintf(` stroke-opacity="%s"`, num(s.opacity))
		}
		if s.dashed {
			paint += ` stroke-dasharray="3,3"`
		}
	}
	switch s.kind {
	case shapeLine:
		fmt.Fprintf(b, `<line x1="%s" x2="%s" y1="%s" y2="%s"%s/>`+"\n", num(s.pts[0].x), num(s.pts[1].x), num(s.pts[0].y), num(s.pts[1].y), paint)
	case shapePolyline:
		coords := make([]string, len(s.pts))
		for i, p := range s.pts {
			coords[i] = num(p.x) + "," + num(p.y)
		}
		fmt.Fprintf(b, `<polyline fill="none"%s points="%s"/>`+"\n", paint, strings.Join(coords, " "))
	case shapeCircle:
		fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="%s" fill="%s"/>`+"\n", num(s.pts[0].x), num(s.pts[0].y), num(s.r), s.fill)
	case shapeRect:
		fill := "none"
		if s.fill != "" {
			fill = s.fill
		}
		if s.fillOpacity != 0 {
			fill += fmt.Sprintf(`" fill-opacity="%s`, num(s.fillOpacity))
		}
		fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="%s" fill="%s"%s/>`+"\n", num(s.pts[0].x), num(s.pts[0].y), num(s.pts[1].x), num(s.pts[1].y), fill, paint)
	case shapeText:
		extra := ""
		if s.size != 12 {
			extra += fmt.Sprintf(` font-size="%d"`, s.size)
		}
		if s.fill != "" {
			extra += fmt.Sprintf(` fill="%s"`, s.fill)
		}
		if s.anchor != "start" {
			extra += fmt.Sprintf(` text-anchor="%s"`, s.anchor)
		}
		fmt.Fprintf(b, `<text x="%s" y="%s"%s>%s</text>`+"\n", num(s.pts[0].x), num(s.pts[0].y), extra, esc(s.text))
	}
}

// num writes a coordinate with at most one decimal.
func num(v float64) string { return strconv.FormatFloat(round1(v), 'f', -1, 64) }

// esc escapes text for SVG.
func esc(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}
