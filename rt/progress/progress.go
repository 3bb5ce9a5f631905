// Package progress reports a training run to the person watching it and to
// the tools that plot it. On a terminal the Reporter keeps one line up to
// date (epoch, step, running loss and accuracy, images per second, time
// elapsed and left); anywhere else (a log file, CI) it prints plain lines, one
// every few steps and one per epoch, so logs stay readable. Metrics writes
// the same numbers as JSON lines, one object per event, flushed as they
// happen so a crashed run keeps its history.
//
// Nothing is colored, so NO_COLOR holds trivially; TERM=dumb turns the
// updating line off.
//
// This package is copied into each generated program's module (it is embedded
// in the mlbuild binary), so it imports only the standard library.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// DefaultEvery is how many steps apart the plain (non-terminal) step lines
// are: often enough to see a run is alive, rare enough for a log file.
const DefaultEvery = 100

// redrawInterval bounds how often the terminal line is redrawn.
const redrawInterval = 100 * time.Millisecond

// Reporter shows the progress of a training run on w. Create it with
// NewReporter; adjust the exported fields before the first StartEpoch.
type Reporter struct {
	// Quiet suppresses all output; EndEpoch still measures throughput.
	Quiet bool
	// NoAccuracy leaves accuracy out of the lines: a regression model has
	// none.
	NoAccuracy bool
	// Terminal selects the single updating line; NewReporter sets it when
	// w is a terminal.
	Terminal bool
	// Every is the distance in steps between plain step lines (0: none).
	Every int
	// Now is the clock; tests replace it.
	Now func() time.Time
	// Data, when set, reports the bytes of files the data loader has read
	// and the time training has waited for it, both since the run began;
	// the lines then show the rate the data is read at and the share of
	// the epoch spent waiting for it (a data set read from files per
	// batch, such as an image folder, can be what limits a run).
	Data func() (bytes int64, waited time.Duration)
	// Rate is the unit of the throughput in the lines; "" is "img/s".
	// A run on rows of a table says "rows/s", on arrays "samples/s", on
	// windows of text "tokens/s".
	Rate string
	// PerSample is how many of Rate's units one sample is (the tokens
	// of a window of text); 0 is 1.
	PerSample int

	w             io.Writer
	epochs        int
	stepsPerEpoch int
	batch         int

	started     bool
	runStart    time.Time
	runSteps    int // steps taken since the run (this process) started
	epoch       int
	epochStart  time.Time
	epochSteps  int // steps taken in this epoch by this process
	step        int
	lastStep    time.Time
	lastDraw    time.Time
	loss, acc   float64
	lineShowing bool // the terminal line is drawn and not yet ended
	// the Data figures when the epoch started
	epochBytes  int64
	epochWaited time.Duration
}

// NewReporter returns a Reporter for a run of epochs epochs of stepsPerEpoch
// steps of batch images, writing to w.
func NewReporter(w io.Writer, epochs, stepsPerEpoch, batch int) *Reporter {
	return &Reporter{
		Terminal:      IsTerminal(w),
		Every:         DefaultEvery,
		Now:           time.Now,
		w:             w,
		epochs:        epochs,
		stepsPerEpoch: stepsPerEpoch,
		batch:         batch,
	}
}

// IsTerminal reports whether w is a terminal that can redraw a line: a
// character device, with TERM not "dumb".
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// StartEpoch begins epoch (counted from 1).
func (r *Reporter) StartEpoch(epoch int) {
	now := r.Now()
	if !r.started {
		r.started, r.runStart = true, now
	}
	r.epoch, r.epochStart, r.lastStep, r.epochSteps = epoch, now, now, 0
	if r.Data != nil {
		r.epochBytes, r.epochWaited = r.Data()
	}
}

// dataRate is the data loader's part of a line: the megabytes per second
// read from files this epoch and the share of the epoch spent waiting for
// them, or nothing when no files are read per batch.
func (r *Reporter) dataRate(now time.Time) []string {
	if r.Data == nil {
		return nil
	}
	bytes, waited := r.Data()
	d := now.Sub(r.epochStart).Seconds()
	if bytes == r.epochBytes || d <= 0 {
		return nil
	}
	rate := float64(bytes-r.epochBytes) / d / 1e6
	wait := (waited - r.epochWaited).Seconds() / d
	return []string{"data " + FormatRate(rate) + " MB/s", "waiting " + FormatPercent(min(wait, 1))}
}

// Step records that step (counted from 1 within the epoch) is done, with the
// epoch's running mean loss and accuracy so far.
func (r *Reporter) Step(step int, meanLoss, acc float64) {
	now := r.Now()
	r.step, r.loss, r.acc, r.lastStep = step, meanLoss, acc, now
	r.runSteps++
	r.epochSteps++
	if r.Quiet {
		return
	}
	if r.Terminal {
		if now.Sub(r.lastDraw) >= redrawInterval || step == r.stepsPerEpoch {
			r.lastDraw = now
			fmt.Fprintf(r.w, "\r%s\x1b[K", r.stepLine(now, "  "))
			r.lineShowing = true
		}
		return
	}
	if r.Every > 0 && step%r.Every == 0 {
		fmt.Fprintln(r.w, r.stepLine(now, " "))
	}
}

// stepLine is the progress of the current step, fields separated by sep.
func (r *Reporter) stepLine(now time.Time, sep string) string {
	parts := []string{
		fmt.Sprintf("epoch %d/%d", r.epoch, r.epochs),
		fmt.Sprintf("step %d/%d", r.step, r.stepsPerEpoch),
		"loss " + FormatLoss(r.loss),
		"acc " + FormatPercent(r.acc),
		FormatRate(r.imagesPerSec()) + " " + r.rateUnit(),
	}
	if r.NoAccuracy {
		parts = append(parts[:3], parts[4:]...)
	}
	parts = append(parts, r.dataRate(r.lastStep)...)
	parts = append(parts, "elapsed "+FormatDuration(now.Sub(r.runStart)), "left "+r.timeLeft(now))
	return strings.Join(parts, sep)
}

// rateUnit is the unit of the throughput in the lines.
func (r *Reporter) rateUnit() string {
	if r.Rate == "" {
		return "img/s"
	}
	return r.Rate
}

// imagesPerSec is the training throughput of this epoch, up to its last
// step (so evaluation after the last step does not count).
func (r *Reporter) imagesPerSec() float64 {
	d := r.lastStep.Sub(r.epochStart).Seconds()
	if d <= 0 {
		return 0
	}
	return float64(r.epochSteps*r.batch*max(r.PerSample, 1)) / d
}

// timeLeft estimates the rest of the run from the mean time per step so far.
func (r *Reporter) timeLeft(now time.Time) string {
	if r.runSteps == 0 {
		return "?"
	}
	remaining := (r.epochs-r.epoch)*r.stepsPerEpoch + (r.stepsPerEpoch - r.step)
	perStep := now.Sub(r.runStart) / time.Duration(r.runSteps)
	return FormatDuration(perStep * time.Duration(max(remaining, 0)))
}

// EndEpoch ends the current epoch: it prints one summary line with the
// training loss and accuracy of ev and, when ev has them, the validation
// loss and accuracy, and returns the epoch's training throughput in images
// per second.
func (r *Reporter) EndEpoch(ev Event) float64 {
	now := r.Now()
	ips := r.imagesPerSec()
	if r.Quiet {
		return ips
	}
	r.endLine()
	parts := []string{
		fmt.Sprintf("epoch %d/%d", r.epoch, r.epochs),
		"loss " + FormatLoss(ev.Loss),
		"acc " + FormatPercent(ev.Acc),
	}
	if r.NoAccuracy {
		parts = parts[:2]
	}
	if ev.ValLoss != 0 || ev.ValAcc != 0 {
		parts = append(parts, "val_loss "+FormatLoss(ev.ValLoss))
		if !r.NoAccuracy {
			parts = append(parts, "val_acc "+FormatPercent(ev.ValAcc))
		}
	}
	parts = append(parts, FormatRate(ips)+" "+r.rateUnit())
	parts = append(parts, r.dataRate(r.lastStep)...)
	parts = append(parts,
		"took "+FormatDuration(now.Sub(r.epochStart)),
		"elapsed "+FormatDuration(now.Sub(r.runStart)),
	)
	if r.epoch < r.epochs {
		parts = append(parts, "left "+r.timeLeft(now))
	}
	fmt.Fprintln(r.w, strings.Join(parts, " "))
	return ips
}

// Interrupted ends the terminal line, so that what is printed next (the
// message about the checkpoint) starts on a line of its own.
func (r *Reporter) Interrupted() {
	if !r.Quiet {
		r.endLine()
	}
}

// Printf prints a message on a line of its own, ending the terminal line
// first if one is showing.
func (r *Reporter) Printf(format string, args ...any) {
	if r.Quiet {
		return
	}
	r.endLine()
	fmt.Fprintf(r.w, format, args...)
	if !strings.HasSuffix(format, "\n") {
		fmt.Fprintln(r.w)
	}
}

func (r *Reporter) endLine() {
	if r.lineShowing {
		fmt.Fprintln(r.w)
		r.lineShowing = false
	}
}
