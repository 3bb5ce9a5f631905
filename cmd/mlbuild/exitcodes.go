package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/mlbuild/mlbuild/spec"
)

// specExitCode is the exit code of a spec that failed to load or plan, as
// the README's table has it: 4 when one of its files cannot be read, 70
// when mlbuild itself failed (a panic caught while evaluating, a plan that
// broke an invariant), 1 when the spec is not legal.
func specExitCode(err error, files ...string) int {
	for _, f := range files {
		if unreadable(f) {
			return ExitIO
		}
	}
	if isBug(err) {
		return ExitInternal
	}
	return ExitInvalid
}

// unreadable reports whether a spec file cannot be read (missing, a
// folder, a FIFO or device, no permission). It opens only regular files:
// opening a FIFO would wait for a writer.
func unreadable(path string) bool {
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return true
	}
	f, err := os.Open(path)
	if err != nil {
		return true
	}
	defer f.Close()
	_, err = f.Read(make([]byte, 1))
	return err != nil && err != io.EOF
}

// isBug reports whether err is mlbuild's own failure rather than the
// spec's: the stages mark those "internal error" or "a bug in mlbuild".
func isBug(err error) bool {
	var es spec.Errors
	if errors.As(err, &es) {
		for _, e := range es {
			if strings.Contains(e.Message, "internal error") {
				return true
			}
		}
		return false
	}
	var pe *spec.Error
	if errors.As(err, &pe) {
		return false
	}
	return err != nil && strings.Contains(err.Error(), "a bug in mlbuild")
}

// recoverBug turns a panic in a command into exit code 70 and a request
// to report it, with the stack, instead of Go's exit 2 (a usage error in
// the README's table).
func recoverBug(stderr io.Writer, code *int) {
	r := recover()
	if r == nil {
		return
	}
	fmt.Fprintf(stderr, "mlbuild: internal error (a bug in mlbuild; please report it with this message): %v\n%s", r, debug.Stack())
	*code = ExitInternal
}
