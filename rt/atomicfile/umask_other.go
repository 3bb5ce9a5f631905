//go:build !unix

package atomicfile

import "os"

// umask is zero where the system has no umask.
func umask() os.FileMode { return 0 }
