package plot

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Marker is the second line of every SVG file SVG writes, where `mlbuild
// plot` looks to know that it may replace a file without --force.
const Marker = "<!-- written by mlbuild plot -->"

// The figure: two panels side by side, loss on the left, accuracy on the
// right, each with its axes, ticks, epoch ends and a legend.
const (
	width, height          = 960, 400
	panelW, panelH         = 380, 280
	panelTop, panelLeft    = 50, 70
	panelGap               = 100
	colourTrain, colourVal = "#1f77b4", "#ff7f0e"
)

// series is one curve of a panel.
type series struct {
	name    string
	colour  string
	points  []Point
	faint   bool // every step's value: thin and light, behind the epochs'
	markers bool
}

// SVG writes the learning curves of run as an SVG document titled title.
func SVG(w io.Writer, run *Run, title string) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	b.WriteString(Marker + "\n")
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" text-anchor="middle">%s</text>`+"\n", width/2, esc(title))
	lastStep := 1
	for _, ps := range [][]Point{run.StepLoss, run.Loss} {
		if len(ps) > 0 {
			lastStep = max(lastStep, ps[len(ps)-1].Step)
		}
	}
	panel(&b, panelLeft, "loss", false, lastStep, run.Epochs, []series{
		{name: "training, each step", colour: colourTrain, points: run.StepLoss, faint: true},
		{name: "training, epoch mean", colour: colourTrain, points: run.Loss, markers: true},
		{name: "validation", colour: colourVal, points: run.ValLoss, markers: true},
	})
	panel(&b, panelLeft+panelW+panelGap, "accuracy", true, lastStep, run.Epochs, []series{
		{name: "training, each step", colour: colourTrain, points: run.StepAcc, faint: true},
		{name: "training, epoch mean", colour: colourTrain, points: run.Acc, markers: true},
		{name: "validation", colour: colourVal, points: run.ValAcc, markers: true},
	})
	b.WriteString("</svg>\n")
	_, err := w.Write(b.Bytes())
	return err
}

// panel draws one chart with its left edge at x0.
func panel(b *bytes.Buffer, x0 int, name string, percent bool, lastStep int, epochs []int, ss []series) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		for _, p := range s.points {
			if !math.IsNaN(p.Value) && !math.IsInf(p.Value, 0) {
				lo, hi = min(lo, p.Value), max(hi, p.Value)
			}
		}
	}
	if lo > hi {
		lo, hi = 0, 1
	}
	lo = min(lo, 0) // both loss and accuracy read best from zero
	if percent {
		hi = 1
	}
	if hi <= lo {
		hi = lo + 1
	}
	yTicks := niceTicks(lo, hi, 5)
	lo, hi = min(lo, yTicks[0]), max(hi, yTicks[len(yTicks)-1])
	x := func(step int) float64 { return float64(x0) + float64(step)/float64(lastStep)*panelW }
	y := func(v float64) float64 { return panelTop + panelH - (v-lo)/(hi-lo)*panelH }

	fmt.Fprintf(b, `<g class="%s">`+"\n", name)
	fmt.Fprintf(b, `<text x="%d" y="%d" font-size="14" text-anchor="middle">%s</text>`+"\n", x0+panelW/2, panelTop-8, name)
	for _, t := range yTicks {
		label := strconv.FormatFloat(t, 'g', 4, 64)
		if percent {
			label = strconv.FormatFloat(math.Round(t*1000)/10, 'f', -1, 64) + "%"
		}
		fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x0, x0+panelW, y(t), y(t))
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", x0-6, y(t)+4, label)
	}
	for _, t := range niceTicks(0, float64(lastStep), 5) {
		if t > float64(lastStep) {
			continue
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x(int(t)), panelTop+panelH+16, strconv.FormatFloat(t, 'f', -1, 64))
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">step</text>`+"\n", x0+panelW/2, panelTop+panelH+34)
	for i, e := range epochs {
		fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#bbb" stroke-dasharray="3,3"/>`+"\n", x(e), x(e), panelTop, panelTop+panelH)
		if len(epochs) <= 20 || (i+1)%((len(epochs)+19)/20) == 0 {
			fmt.Fprintf(b, `<text x="%.1f" y="%d" font-size="9" fill="#888" text-anchor="end">epoch %d</text>`+"\n", x(e)-2, panelTop+10, i+1)
		}
	}
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#444"/>`+"\n", x0, panelTop, panelW, panelH)
	var shown []series
	for _, s := range ss {
		if len(s.points) > 0 {
			shown = append(shown, s)
		}
	}
	for _, s := range shown {
		var pts []string
		for _, p := range s.points {
			if !math.IsNaN(p.Value) && !math.IsInf(p.Value, 0) {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.Step), y(p.Value)))
			}
		}
		style := `stroke-width="2"`
		if s.faint {
			style = `stroke-width="1" stroke-opacity="0.35"`
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" %s points="%s"/>`+"\n", s.colour, style, strings.Join(pts, " "))
		if s.markers {
			for _, p := range pts {
				cx, cy, _ := strings.Cut(p, ",")
				fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="3" fill="%s"/>`+"\n", cx, cy, s.colour)
			}
		}
	}
	// The legend, on white: loss falls from the top left and accuracy
	// rises from the bottom left, so it goes where the curves are not.
	lx, ly := x0+panelW-170, panelTop+24
	if percent {
		ly = panelTop + panelH - 16*len(shown) - 8
	}
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="164" height="%d" fill="white" fill-opacity="0.85" stroke="#ccc"/>`+"\n", lx-4, ly-14, 16*len(shown)+6)
	for i, s := range shown {
		opacity := ""
		if s.faint {
			opacity = ` stroke-opacity="0.35"`
		}
		yy := ly + 16*i
		fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", lx, lx+20, yy-4, yy-4, s.colour, opacity)
		fmt.Fprintf(b, `<text x="%d" y="%d">%s</text>`+"\n", lx+26, yy, esc(s.name))
	}
	b.WriteString("</g>\n")
}

// niceTicks returns about n round values (1, 2 or 5 times a power of ten
// apart) from at or below lo to at or above hi.
func niceTicks(lo, hi float64, n int) []float64 {
	span := hi - lo
	if span <= 0 {
		span = 1
	}
	raw := span / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var ticks []float64
	for k := math.Floor(lo / step); k*step < hi+step/2; k++ {
		// through 12 digits, so that 3 × 0.2 is 0.6
		t, _ := strconv.ParseFloat(strconv.FormatFloat(k*step, 'g', 12, 64), 64)
		ticks = append(ticks, t)
	}
	return ticks
}

// esc escapes text for SVG.
func esc(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}
