package spec

import (
	"fmt"
	"strings"
)

// Error is one problem found in a spec, positioned at the user's line so an
// editor or a reader can jump to it. The loader reports it in Errors; the
// planner returns a *Error for a spec it cannot plan (a layer too large for
// a buffer, a plan above the memory limit), positioned at the layer.
type Error struct {
	Pos     Pos    `json:"pos"`
	Layer   string `json:"layer,omitempty"` // the layer or node the problem belongs to, if any
	Message string `json:"message"`
}

// Error formats the problem as FILE:LINE:COL: layer NAME: message, with
// a long name shortened (Short).
func (e Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Pos.String())
	b.WriteString(": ")
	if e.Layer != "" {
		fmt.Fprintf(&b, "layer %s: ", Short(e.Layer))
	}
	b.WriteString(e.Message)
	return b.String()
}

// String formats a position as FILE:LINE:COL, or just FILE when the line is
// unknown (a file that could not be read).
func (p Pos) String() string {
	if p.Line <= 0 {
		if p.File == "" {
			return "-"
		}
		return p.File
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// Errors is every problem found in one spec. Load returns it (possibly
// wrapped) when a spec is not legal; it is never empty.
type Errors []Error

// Error prints one problem per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}
