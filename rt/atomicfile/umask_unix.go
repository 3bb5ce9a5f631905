//go:build unix

package atomicfile

import (
	"os"
	"syscall"
)

// processUmask is read once at start-up: reading it means setting it, which
// would race with files created by other goroutines later on.
var processUmask = func() os.FileMode {
	m := syscall.Umask(0o022)
	syscall.Umask(m)
	return os.FileMode(m)
}()

// umask is the process umask, so that files get the permissions that
// os.OpenFile would have given them (CreateTemp makes them 0600).
func umask() os.FileMode { return processUmask }
