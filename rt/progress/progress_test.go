package progress

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestFormatDuration(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0.0s"},
		{0, "0.0s"},
		{4249 * time.Millisecond, "4.2s"},
		{9960 * time.Millisecond, "10s"},
		{45 * time.Second, "45s"},
		{59600 * time.Millisecond, "1m00s"},
		{83 * time.Second, "1m23s"},
		{65 * time.Second, "1m05s"},
		{time.Hour - time.Second, "59m59s"},
		{time.Hour + 2*time.Minute + 3*time.Second, "1h02m03s"},
		{100 * time.Hour, "100h00m00s"},
	}
	for _, tt := range tests {
		if got := FormatDuration(tt.d); got != tt.want {
			t.Errorf("FormatDuration(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

func TestFormatNumbers(t *testing.T) {
	tests := []struct{ got, want string }{
		{FormatRate(0), "0"},
		{FormatRate(math.NaN()), "0"},
		{FormatRate(math.Inf(1)), "0"},
		{FormatRate(12.345), "12.3"},
		{FormatRate(1234.5), "1234"},
		{FormatLoss(0.0432109), "0.04321"},
		{FormatLoss(2.302585), "2.303"},
		{FormatLoss(math.NaN()), "NaN"},
		{FormatLoss(math.Inf(1)), "+Inf"},
		{FormatPercent(0.98614), "98.61%"},
		{FormatPercent(1), "100.00%"},
	}
	for i, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("case %d: got %q, want %q", i, tt.got, tt.want)
		}
	}
}

// fakeClock advances by step on every call.
func fakeClock(step time.Duration) func() time.Time {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return func() time.Time {
		now = now.Add(step)
		return now
	}
}

// TestReporterPlain runs two epochs of four steps of 10 images, each call
// one second apart, and checks the exact log.
func TestReporterPlain(t *testing.T) {
	var buf bytes.Buffer
	r := NewReporter(&buf, 2, 4, 10)
	if r.Terminal {
		t.Fatal("a bytes.Buffer is not a terminal")
	}
	r.Every = 2
	r.Now = fakeClock(time.Second)
	var ips []float64
	for e := 1; e <= 2; e++ {
		r.StartEpoch(e)
		for s := 1; s <= 4; s++ {
			r.Step(s, 1/float64(s), 0.25*float64(s))
		}
		ev := Event{Loss: 0.5, Acc: 0.75}
		if e == 2 {
			ev.ValLoss, ev.ValAcc = 0.25, 0.875
		}
		ips = append(ips, r.EndEpoch(ev))
	}
	want := strings.Join([]string{
		"epoch 1/2 step 2/4 loss 0.5 acc 50.00% 10.0 img/s elapsed 2.0s left 6.0s",
		"epoch 1/2 step 4/4 loss 0.25 acc 100.00% 10.0 img/s elapsed 4.0s left 4.0s",
		"epoch 1/2 loss 0.5 acc 75.00% 10.0 img/s took 5.0s elapsed 5.0s left 5.0s",
		"epoch 2/2 step 2/4 loss 0.5 acc 50.00% 10.0 img/s elapsed 8.0s left 2.7s",
		"epoch 2/2 step 4/4 loss 0.25 acc 100.00% 10.0 img/s elapsed 10s left 0.0s",
		"epoch 2/2 loss 0.5 acc 75.00% val_loss 0.25 val_acc 87.50% 10.0 img/s took 5.0s elapsed 11s",
		"",
	}, "\n")
	if got := buf.String(); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if ips[0] != 10 || ips[1] != 10 {
		t.Fatalf("EndEpoch returned %v, want 10 images/s", ips)
	}
}

// TestReporterTerminal checks the updating line: carriage returns, erase to
// the end of the line, and a newline before anything else is printed.
func TestReporterTerminal(t *testing.T) {
	var buf bytes.Buffer
	r := NewReporter(&buf, 1, 3, 1)
	r.Terminal = true
	r.Now = fakeClock(time.Second)
	r.StartEpoch(1)
	r.Step(1, 2, 0)
	r.Step(2, 1.5, 0.5)
	r.Printf("note: %s", "hello")
	r.Step(3, 1, 1)
	r.EndEpoch(Event{Loss: 1, Acc: 1})
	out := buf.String()
	lines := strings.Split(out, "\n")
	if len(lines) != 5 || lines[4] != "" {
		t.Fatalf("want 4 lines, got %q", out)
	}
	if !strings.HasPrefix(lines[0], "\repoch 1/1  step 1/3  loss 2  acc 0.00%") || strings.Count(lines[0], "\r") != 2 || !strings.HasSuffix(lines[0], "\x1b[K") {
		t.Errorf("live line %q", lines[0])
	}
	if lines[1] != "note: hello" {
		t.Errorf("message line %q", lines[1])
	}
	if !strings.HasPrefix(lines[2], "\repoch 1/1  step 3/3") {
		t.Errorf("live line after the message %q", lines[2])
	}
	if !strings.HasPrefix(lines[3], "epoch 1/1 loss 1 acc 100.00%") {
		t.Errorf("summary %q", lines[3])
	}
}

func TestReporterQuiet(t *testing.T) {
	var buf bytes.Buffer
	r := NewReporter(&buf, 1, 2, 5)
	r.Quiet, r.Every = true, 1
	r.Now = fakeClock(time.Second)
	r.StartEpoch(1)
	r.Step(1, 1, 1)
	r.Step(2, 1, 1)
	r.Printf("x")
	r.Interrupted()
	if ips := r.EndEpoch(Event{}); ips != 5 {
		t.Errorf("EndEpoch = %v, want 5 images/s", ips)
	}
	if buf.Len() != 0 {
		t.Fatalf("quiet reporter printed %q", buf.String())
	}
}

func TestIsTerminal(t *testing.T) {
	if IsTerminal(&bytes.Buffer{}) {
		t.Error("bytes.Buffer is a terminal")
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if IsTerminal(f) {
		t.Error("a regular file is a terminal")
	}
}

func TestMetrics(t *testing.T) {
	var buf bytes.Buffer
	m := NewMetrics(&buf)
	m.Now = fakeClock(1500 * time.Millisecond)
	events := []Event{
		{Event: "step", Epoch: 1, Step: 50, Loss: 0.5, Acc: 0.875, LR: 1e-3},
		{Event: "epoch", Epoch: 1, Step: 240, Loss: math.NaN(), Acc: 0.9, ValLoss: 0.1, ValAcc: 0.97, LR: 1e-3, ImagesPerSec: 2500.5},
		{Event: "eval", Loss: 0.03, Acc: 0.9912, Samples: 10000, Time: time.Date(2026, 5, 6, 7, 8, 9, 123456789, time.FixedZone("x", 3600))},
	}
	for _, ev := range events {
		if err := m.Write(ev); err != nil {
			t.Fatal(err)
		}
	}
	want := `{"event":"step","epoch":1,"step":50,"loss":0.5,"acc":0.875,"lr":0.001,"time":"2026-01-02T03:04:06.500Z"}
{"event":"epoch","epoch":1,"step":240,"loss":null,"acc":0.9,"val_loss":0.1,"val_acc":0.97,"lr":0.001,"images_per_sec":2500.5,"time":"2026-01-02T03:04:08.000Z"}
{"event":"eval","epoch":0,"step":0,"loss":0.03,"acc":0.9912,"samples":10000,"time":"2026-05-06T06:08:09.123Z"}
`
	if got := buf.String(); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("line %q is not JSON: %v", line, err)
		}
	}
}

// countingWriter records how many Write calls it got.
type countingWriter struct {
	calls int
	buf   bytes.Buffer
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.calls++
	return c.buf.Write(p)
}

// TestMetricsOneWritePerLine checks that every event reaches the writer at
// once, as a whole line: nothing is held back in a buffer.
func TestMetricsOneWritePerLine(t *testing.T) {
	var w countingWriter
	m := NewMetrics(&w)
	for i := range 3 {
		m.Write(Event{Event: "step", Step: i + 1})
		if w.calls != i+1 || !strings.HasSuffix(w.buf.String(), "}\n") {
			t.Fatalf("after event %d: %d writes, %q", i+1, w.calls, w.buf.String())
		}
	}
}

// TestReporterNoAccuracy checks that a regression run's lines carry the
// losses but no accuracy.
func TestReporterNoAccuracy(t *testing.T) {
	var buf bytes.Buffer
	r := NewReporter(&buf, 1, 2, 10)
	r.Every = 2
	r.NoAccuracy = true
	r.Now = fakeClock(time.Second)
	r.StartEpoch(1)
	r.Step(1, 1, 0)
	r.Step(2, 0.5, 0)
	r.EndEpoch(Event{Loss: 0.5, ValLoss: 0.25})
	want := "epoch 1/1 step 2/2 loss 0.5 10.0 img/s elapsed 2.0s left 0.0s\n" +
		"epoch 1/1 loss 0.5 val_loss 0.25 10.0 img/s took 3.0s elapsed 3.0s\n"
	if got := buf.String(); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

// TestReporterDataRate runs an epoch whose loader reads 2 MB and waits a
// quarter of a second per one-second step, on top of 5 MB read before the
// epoch, and checks the rate and the waiting share the lines show.
func TestReporterDataRate(t *testing.T) {
	var buf bytes.Buffer
	r := NewReporter(&buf, 1, 4, 10)
	r.Every = 2
	r.Now = fakeClock(time.Second)
	read, waited := int64(5e6), 3*time.Second
	r.Data = func() (int64, time.Duration) { return read, waited }
	r.StartEpoch(1)
	for s := 1; s <= 4; s++ {
		read += 2e6
		waited += time.Second / 4
		r.Step(s, 1, 0.5)
	}
	r.EndEpoch(Event{Loss: 1, Acc: 0.5})
	want := strings.Join([]string{
		"epoch 1/1 step 2/4 loss 1 acc 50.00% 10.0 img/s data 2.0 MB/s waiting 25.00% elapsed 2.0s left 2.0s",
		"epoch 1/1 step 4/4 loss 1 acc 50.00% 10.0 img/s data 2.0 MB/s waiting 25.00% elapsed 4.0s left 0.0s",
		"epoch 1/1 loss 1 acc 50.00% 10.0 img/s data 2.0 MB/s waiting 25.00% took 5.0s elapsed 5.0s",
		"",
	}, "\n")
	if got := buf.String(); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	// A loader that reads no files (arrays in memory) adds nothing.
	buf.Reset()
	r = NewReporter(&buf, 1, 2, 10)
	r.Every = 1
	r.Now = fakeClock(time.Second)
	r.Data = func() (int64, time.Duration) { return 0, time.Millisecond }
	r.StartEpoch(1)
	r.Step(1, 1, 0.5)
	if strings.Contains(buf.String(), "data") {
		t.Errorf("no files read, yet: %s", buf.String())
	}
}

// TestReporterRateUnit: a run on rows of a table says rows/s, not img/s.
func TestReporterRateUnit(t *testing.T) {
	var buf bytes.Buffer
	r := NewReporter(&buf, 1, 2, 10)
	r.Every, r.Now, r.Rate = 1, fakeClock(time.Second), "rows/s"
	r.StartEpoch(1)
	r.Step(1, 1, 0.5)
	r.EndEpoch(Event{Loss: 1, Acc: 0.5})
	if got := buf.String(); strings.Count(got, " rows/s ") != 2 || strings.Contains(got, "img/s") {
		t.Errorf("the lines of a run in rows/s:\n%s", got)
	}
}

// TestReporterTokens: a run on windows of text counts PerSample tokens a
// sample: 2 steps of 10 windows of 64 tokens in 2 s are 640 tokens/s.
func TestReporterTokens(t *testing.T) {
	var buf bytes.Buffer
	r := NewReporter(&buf, 1, 2, 10)
	r.Every = 2
	r.NoAccuracy = true
	r.Rate, r.PerSample = "tokens/s", 64
	r.Now = fakeClock(time.Second)
	r.StartEpoch(1)
	r.Step(1, 1, 0)
	r.Step(2, 0.5, 0)
	r.EndEpoch(Event{Loss: 0.5, ValLoss: 0.25})
	want := "epoch 1/1 step 2/2 loss 0.5 640 tokens/s elapsed 2.0s left 0.0s\n" +
		"epoch 1/1 loss 0.5 val_loss 0.25 640 tokens/s took 3.0s elapsed 3.0s\n"
	if got := buf.String(); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}
