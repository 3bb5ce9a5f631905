//go:build !linux && !darwin

package npy

import (
	"errors"
	"os"
)

// mapFile is unavailable here; callers read the file into memory instead.
func mapFile(f *os.File, size int64) (data []byte, unmap func() error, err error) {
	return nil, nil, errors.New("memory mapping not supported on this OS")
}
