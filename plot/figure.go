package plot

import (
	"fmt"
	"math"
	"strconv"
)

// The figure is laid out once, as a list of shapes, and rendered by SVG or
// PNG: two panels side by side, loss on the left, accuracy on the right,
// each with its axes, ticks, epoch ends and a legend.
const (
	width, height          = 960, 400
	panelW, panelH         = 380, 280
	panelTop, panelLeft    = 50, 70
	panelGap               = 100
	colourTrain, colourVal = "#1f77b4", "#ff7f0e"
)

// shapeKind is what a shape draws.
type shapeKind int

const (
	shapeLine     shapeKind = iota // from pts[0] to pts[1]
	shapePolyline                  // through pts
	shapeCircle                    // filled, centre pts[0], radius r
	shapeRect                      // corner pts[0], size pts[1]
	shapeText                      // at pts[0] (the baseline), anchored
)

// shape is one element of the figure.
type shape struct {
	kind        shapeKind
	pts         []pt
	r           float64
	stroke      string  // colour, "" for none
	fill        string  // colour, "" for none
	width       float64 // stroke width
	opacity     float64 // of the stroke, 0 for opaque
	fillOpacity float64 // of the fill, 0 for opaque
	dashed      bool
	text        string
	size        int    // font size in pixels
	anchor      string // "start", "middle" or "end"
	group       string // the panel a shape belongs to, "" for the figure
}

type pt struct{ x, y float64 }

// series is one curve of a panel.
type series struct {
	name    string
	colour  string
	points  []Point
	faint   bool // every step's value: thin and light, behind the epochs'
	markers bool
}

// figure lays out the learning curves of run.
func figure(run *Run, title string) []shape {
	shapes := []shape{
		{kind: shapeRect, pts: []pt{{0, 0}, {width, height}}, fill: "white"},
		{kind: shapeText, pts: []pt{{width / 2, 22}}, text: title, size: 15, anchor: "middle"},
	}
	lastStep := 1
	for _, ps := range [][]Point{run.StepLoss, run.Loss} {
		if len(ps) > 0 {
			lastStep = max(lastStep, ps[len(ps)-1].Step)
		}
	}
	shapes = append(shapes, panel(panelLeft, "loss", false, lastStep, run.Epochs, []series{
		{name: "training, each step", colour: colourTrain, points: run.StepLoss, faint: true},
		{name: "training, epoch mean", colour: colourTrain, points: run.Loss, markers: true},
		{name: "validation", colour: colourVal, points: run.ValLoss, markers: true},
	})...)
	shapes = append(shapes, panel(panelLeft+panelW+panelGap, "accuracy", true, lastStep, run.Epochs, []series{
		{name: "training, each step", colour: colourTrain, points: run.StepAcc, faint: true},
		{name: "training, epoch mean", colour: colourTrain, points: run.Acc, markers: true},
		{name: "validation", colour: colourVal, points: run.ValAcc, markers: true},
	})...)
	return shapes
}

// panel lays out one chart with its left edge at x0.
func panel(x0 int, name string, percent bool, lastStep int, epochs []int, ss []series) []shape {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		for _, p := range s.points {
			if finite(p.Value) {
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
	left, right := float64(x0), float64(x0+panelW)
	top, bottom := float64(panelTop), float64(panelTop+panelH)
	x := func(step int) float64 { return round1(left + float64(step)/float64(lastStep)*panelW) }
	y := func(v float64) float64 { return round1(bottom - (v-lo)/(hi-lo)*panelH) }

	var out []shape
	add := func(s shape) {
		s.group = name
		out = append(out, s)
	}
	add(shape{kind: shapeText, pts: []pt{{left + panelW/2, top - 8}}, text: name, size: 14, anchor: "middle"})
	for _, t := range yTicks {
		label := strconv.FormatFloat(t, 'g', 4, 64)
		if percent {
			label = strconv.FormatFloat(math.Round(t*1000)/10, 'f', -1, 64) + "%"
		}
		add(shape{kind: shapeLine, pts: []pt{{left, y(t)}, {right, y(t)}}, stroke: "#ddd", width: 1})
		add(shape{kind: shapeText, pts: []pt{{left - 6, y(t) + 4}}, text: label, size: 12, anchor: "end"})
	}
	for _, t := range niceTicks(0, float64(lastStep), 5) {
		if t <= float64(lastStep) {
			add(shape{kind: shapeText, pts: []pt{{x(int(t)), bottom + 16}}, text: strconv.FormatFloat(t, 'f', -1, 64), size: 12, anchor: "middle"})
		}
	}
	add(shape{kind: shapeText, pts: []pt{{left + panelW/2, bottom + 34}}, text: "step", size: 12, anchor: "middle"})
	for i, e := range epochs {
		add(shape{kind: shapeLine, pts: []pt{{x(e), top}, {x(e), bottom}}, stroke: "#bbb", width: 1, dashed: true})
		if len(epochs) <= 20 || (i+1)%((len(epochs)+19)/20) == 0 {
			add(shape{kind: shapeText, pts: []pt{{x(e) - 2, top + 10}}, text: fmt.Sprintf("epoch %d", i+1), size: 9, anchor: "end", fill: "#888"})
		}
	}
	add(shape{kind: shapeRect, pts: []pt{{left, top}, {panelW, panelH}}, stroke: "#444", width: 1})
	var shown []series
	for _, s := range ss {
		if len(s.points) > 0 {
			shown = append(shown, s)
		}
	}
	for _, s := range shown {
		var pts []pt
		for _, p := range s.points {
			if finite(p.Value) {
				pts = append(pts, pt{x(p.Step), y(p.Value)})
			}
		}
		line := shape{kind: shapePolyline, pts: pts, stroke: s.colour, width: 2}
		if s.faint {
			line.width, line.opacity = 1, 0.35
		}
		add(line)
		if s.markers {
			for _, p := range pts {
				add(shape{kind: shapeCircle, pts: []pt{p}, r: 3, fill: s.colour})
			}
		}
	}
	// The legend, on white: loss falls from the top left and accuracy
	// rises from the bottom left, so it goes where the curves are not.
	lx, ly := right-170, top+24
	if percent {
		ly = bottom - float64(16*len(shown)) - 8
	}
	add(shape{kind: shapeRect, pts: []pt{{lx - 4, ly - 14}, {164, float64(16*len(shown) + 6)}}, fill: "white", fillOpacity: 0.85, stroke: "#ccc", width: 1})
	for i, s := range shown {
		yy := ly + float64(16*i)
		key := shape{kind: shapeLine, pts: []pt{{lx, yy - 4}, {lx + 20, yy - 4}}, stroke: s.colour, width: 2}
		if s.faint {
			key.opacity = 0.35
		}
		add(key)
		add(shape{kind: shapeText, pts: []pt{{lx + 26, yy}}, text: s.name, size: 12, anchor: "start"})
	}
	return out
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// round1 rounds to a tenth of a pixel, what the SVG writes.
func round1(v float64) float64 { return math.Round(v*10) / 10 }

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
