//go:build !darwin

package mps

import (
	"fmt"
	"runtime"
)

// SystemMessenger reports that there is no Objective-C runtime: Metal runs
// only on macOS. Tests use mps/fakemetal instead.
func SystemMessenger() (Messenger, error) {
	return nil, fmt.Errorf("mps: Metal needs macOS, this is %s/%s: %w", runtime.GOOS, runtime.GOARCH, ErrNoDevice)
}
