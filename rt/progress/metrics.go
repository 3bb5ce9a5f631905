package progress

import (
	"io"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/mlbuild/mlbuild/rt/jsontext"
)

// Event is one line of the metrics file. Event is "step", "epoch" or "eval".
// Epoch and Step count from 1; Step is the global step of the run.
type Event struct {
	Event        string
	Epoch        int
	Step         int
	Loss         float64
	Acc          float64
	ValLoss      float64 // written only when ValLoss or ValAcc is set
	ValAcc       float64
	LR           float64 // written when set
	ImagesPerSec float64 // written when set
	Samples      int     // written when set (eval events)
	Time         time.Time
}

// Metrics writes Events as JSON lines for plotting (pandas.read_json(path,
// lines=True) reads them). Each event is one Write of one whole line, so a
// crash loses at most the event being written and concurrent readers never
// see half a line. Fields come in a fixed order; a loss that is NaN or
// infinite is written as null, since JSON has no such numbers.
type Metrics struct {
	mu  sync.Mutex
	w   io.Writer
	Now func() time.Time // the clock for events without a Time; tests replace it
}

// NewMetrics returns a Metrics writing to w (typically a file opened for
// appending, so that a resumed run continues the same history).
func NewMetrics(w io.Writer) *Metrics { return &Metrics{w: w, Now: time.Now} }

// Write appends ev as one JSON line. A zero Time is stamped with the
// current time.
func (m *Metrics) Write(ev Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ev.Time.IsZero() {
		ev.Time = m.Now()
	}
	_, err := m.w.Write(AppendEvent(nil, ev))
	return err
}

// AppendEvent appends the JSON line of ev (with its newline) to b.
func AppendEvent(b []byte, ev Event) []byte {
	b = append(b, `{"event":`...)
	b = jsontext.AppendString(b, ev.Event)
	b = appendInt(b, "epoch", ev.Epoch)
	b = appendInt(b, "step", ev.Step)
	b = appendFloat(b, "loss", ev.Loss)
	b = appendFloat(b, "acc", ev.Acc)
	if ev.ValLoss != 0 || ev.ValAcc != 0 {
		b = appendFloat(b, "val_loss", ev.ValLoss)
		b = appendFloat(b, "val_acc", ev.ValAcc)
	}
	if ev.LR != 0 {
		b = appendFloat(b, "lr", ev.LR)
	}
	if ev.ImagesPerSec != 0 {
		b = appendFloat(b, "images_per_sec", ev.ImagesPerSec)
	}
	if ev.Samples != 0 {
		b = appendInt(b, "samples", ev.Samples)
	}
	b = append(b, `,"time":"`...)
	b = ev.Time.UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	return append(b, "\"}\n"...)
}

func appendInt(b []byte, key string, v int) []byte {
	b = append(b, `,"`+key+`":`...)
	return strconv.AppendInt(b, int64(v), 10)
}

func appendFloat(b []byte, key string, v float64) []byte {
	b = append(b, `,"`+key+`":`...)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(b, "null"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}
