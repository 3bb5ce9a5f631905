package progress

import (
	"fmt"
	"math"
	"time"
)

// FormatDuration renders d compactly and deterministically: "4.2s" under ten
// seconds, then "45s", "1m23s", "1h02m03s". Negative durations show as "0.0s".
func FormatDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	if r := d.Round(100 * time.Millisecond); r < 10*time.Second {
		return fmt.Sprintf("%.1fs", r.Seconds())
	}
	s := int64(d.Round(time.Second) / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	}
	return fmt.Sprintf("%dh%02dm%02ds", s/3600, s/60%60, s%60)
}

// FormatRate renders a throughput: whole numbers from 100 up, one decimal
// below, "0" for nothing measured yet.
func FormatRate(perSec float64) string {
	switch {
	case !(perSec > 0) || math.IsInf(perSec, 0):
		return "0"
	case perSec < 100:
		return fmt.Sprintf("%.1f", perSec)
	}
	return fmt.Sprintf("%.0f", perSec)
}

// FormatLoss renders a loss with four significant digits ("0.04321",
// "2.303"); NaN and infinities show as such, so a diverging run is visible.
func FormatLoss(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Sprint(v)
	}
	return fmt.Sprintf("%.4g", v)
}

// FormatPercent renders a fraction in [0, 1] as a percentage with two
// decimals ("98.61%").
func FormatPercent(v float64) string {
	return fmt.Sprintf("%.2f%%", 100*v)
}
