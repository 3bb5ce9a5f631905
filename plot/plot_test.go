package plot

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mlbuild/mlbuild/rt/progress"
)

// metrics writes events as train --metrics does.
func metrics(evs ...progress.Event) string {
	var b []byte
	for _, ev := range evs {
		ev.Time = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		b = progress.AppendEvent(b, ev)
	}
	return string(b)
}

// twoEpochs is a run of two epochs of three steps with validation.
func twoEpochs() []progress.Event {
	var evs []progress.Event
	step := 0
	for e := 1; e <= 2; e++ {
		for i := 0; i < 3; i++ {
			step++
			evs = append(evs, progress.Event{Event: "step", Epoch: e, Step: step, Loss: 2.0 / float64(step), Acc: 0.1 * float64(step), LR: 0.01})
		}
		evs = append(evs, progress.Event{Event: "epoch", Epoch: e, Step: step, Loss: 1.5 / float64(e), Acc: 0.3 * float64(e), ValLoss: 1.2 / float64(e), ValAcc: 0.35 * float64(e)})
	}
	return evs
}

func TestRead(t *testing.T) {
	r, err := Read("m.jsonl", strings.NewReader(metrics(twoEpochs()...)))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.StepLoss) != 6 || len(r.Loss) != 2 || len(r.ValAcc) != 2 || len(r.Epochs) != 2 || r.Epochs[1] != 6 || r.Runs != 1 {
		t.Errorf("read %+v", r)
	}
	if r.ValLoss[1] != (Point{6, 0.6}) {
		t.Errorf("validation loss of epoch 2: %+v", r.ValLoss[1])
	}

	// A second run appended to the file: the last is kept.
	second := twoEpochs()[:4]
	r, err = Read("m.jsonl", strings.NewReader(metrics(append(twoEpochs(), second...)...)))
	if err != nil || r.Runs != 2 || len(r.StepLoss) != 3 || len(r.Loss) != 1 {
		t.Errorf("two runs: %+v, %v", r, err)
	}

	// A run killed after step 5 and resumed from the checkpoint of epoch 1
	// replays steps 4 and 5: they are not drawn twice.
	evs := twoEpochs()
	killed := append(append([]progress.Event{}, evs[:6]...), evs[4:]...)
	r, err = Read("m.jsonl", strings.NewReader(metrics(killed...)))
	if err != nil || r.Runs != 1 || len(r.StepLoss) != 6 || len(r.Epochs) != 2 {
		t.Errorf("resumed run: %+v, %v", r, err)
	}
	for i, p := range r.StepLoss {
		if p.Step != i+1 {
			t.Errorf("steps out of order after a resume: %+v", r.StepLoss)
			break
		}
	}

	// Not metrics: the error names the file and line.
	if _, err := Read("m.jsonl", strings.NewReader(metrics(twoEpochs()[:2]...)+"{oops\n")); err == nil || !strings.HasPrefix(err.Error(), "m.jsonl:3: not a metrics line") {
		t.Errorf("bad line: %v", err)
	}
	if _, err := Read("e.jsonl", strings.NewReader(`{"event":"eval","samples":3}`+"\n")); err == nil || !strings.Contains(err.Error(), "holds no training metrics") {
		t.Errorf("no training lines: %v", err)
	}
}

// TestSVG draws a run and checks the document: well-formed XML with the
// marker on its second line, and one curve per series with a point per
// value. The drawing itself is kept as a golden file (MLBUILD_UPDATE=1
// rewrites it) to be looked at in review.
func TestSVG(t *testing.T) {
	r, err := Read("m.jsonl", strings.NewReader(metrics(twoEpochs()...)))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := SVG(&b, r, "m.jsonl <test> & more"); err != nil {
		t.Fatal(err)
	}
	if lines := strings.SplitN(b.String(), "\n", 3); lines[1] != Marker {
		t.Errorf("second line %q, want the marker", lines[1])
	}
	dec := xml.NewDecoder(bytes.NewReader(b.Bytes()))
	polylines := map[int]int{} // points per polyline
	n := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			for _, a := range se.Attr {
				if a.Name.Local == "points" {
					polylines[n] = len(strings.Fields(a.Value))
				}
			}
			n++
		}
	}
	want := []int{6, 2, 2, 6, 2, 2} // loss: steps, epochs, validation; then accuracy
	for i, w := range want {
		if polylines[i] != w {
			t.Errorf("polyline %d has %d points, want %d (all: %v)", i, polylines[i], w, polylines)
		}
	}
	golden := filepath.Join("testdata", "two_epochs.svg")
	if os.Getenv("MLBUILD_UPDATE") == "1" {
		os.MkdirAll("testdata", 0o755)
		os.WriteFile(golden, b.Bytes(), 0o644)
	}
	if g, err := os.ReadFile(golden); err != nil || !bytes.Equal(g, b.Bytes()) {
		t.Errorf("the drawing differs from %s (MLBUILD_UPDATE=1 rewrites it): %v", golden, err)
	}
}

func TestNiceTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   string
	}{
		{0, 2.31, "[0 0.5 1 1.5 2 2.5]"},
		{0, 1, "[0 0.2 0.4 0.6 0.8 1]"},
		{0, 1263, "[0 500 1000 1500]"},
	} {
		if got := fmt.Sprint(niceTicks(c.lo, c.hi, 5)); got != c.want {
			t.Errorf("niceTicks(%v, %v) = %s, want %s", c.lo, c.hi, got, c.want)
		}
	}
}

// TestPNG draws the same figure as a PNG: a 960×400 image that decodes,
// carries the marker, and has the curves' colours where the SVG puts
// them (a validation point) and white where there is nothing.
func TestPNG(t *testing.T) {
	r, err := Read("m.jsonl", strings.NewReader(metrics(twoEpochs()...)))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := PNG(&b, r, "m.jsonl"); err != nil {
		t.Fatal(err)
	}
	if !IsPNGMarked(b.Bytes()) {
		t.Errorf("the PNG lacks its marker chunk")
	}
	img, err := png.Decode(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatalf("the PNG does not decode: %v", err)
	}
	if img.Bounds().Dx() != 960 || img.Bounds().Dy() != 400 {
		t.Fatalf("size %v", img.Bounds())
	}
	// Where the SVG puts the last validation point of the loss panel.
	var cx, cy float64
	for _, s := range figure(r, "m.jsonl") {
		if s.kind == shapeCircle && s.fill == colourVal && s.group == "loss" {
			cx, cy = s.pts[0].x, s.pts[0].y
		}
	}
	if cr, cg, cb, _ := img.At(int(cx), int(cy)).RGBA(); cr>>8 != 0xff || cg>>8 != 0x7f || cb>>8 != 0x0e {
		t.Errorf("pixel at the validation point (%v, %v) is %x %x %x, want the validation colour", cx, cy, cr>>8, cg>>8, cb>>8)
	}
	if cr, cg, cb, _ := img.At(5, 395).RGBA(); cr>>8 != 0xff || cg>>8 != 0xff || cb>>8 != 0xff {
		t.Errorf("the corner is not white")
	}
	if IsPNGMarked([]byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("a bare PNG signature passes as marked")
	}
}
