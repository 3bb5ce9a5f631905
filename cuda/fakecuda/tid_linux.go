//go:build linux

package fakecuda

import "syscall"

// threadID is the calling OS thread, which a CUDA context is current on.
func threadID() int { return syscall.Gettid() }
