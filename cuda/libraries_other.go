//go:build !linux

package cuda

import (
	"fmt"
	"runtime"
)

// LoadLibraries reports that NVIDIA's libraries load only on Linux: the
// package builds everywhere (so the programs that carry it do), but a CUDA
// program runs on linux/amd64 or linux/arm64.
func LoadLibraries() (*Libraries, error) {
	return nil, fmt.Errorf("cuda: NVIDIA's libraries are loaded only on Linux, this is %s/%s; compile the spec again with --backend cpu to run here: %w",
		runtime.GOOS, runtime.GOARCH, ErrNoDevice)
}

// LoadNCCL reports that NCCL loads only on Linux.
func (l *Libraries) LoadNCCL() error {
	return fmt.Errorf("cuda: NCCL is loaded only on Linux, this is %s/%s: %w", runtime.GOOS, runtime.GOARCH, ErrNoDevice)
}

// LoadDNN reports that cuDNN loads only on Linux.
func (l *Libraries) LoadDNN() error {
	return fmt.Errorf("cuda: cuDNN is loaded only on Linux, this is %s/%s: %w", runtime.GOOS, runtime.GOARCH, ErrNoDevice)
}
