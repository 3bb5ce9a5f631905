package gpuhosttest

import (
	"embed"
	"fmt"

	"github.com/mlbuild/mlbuild/rt/gpuhost"
)

// Kernel is one kernel of the suite: its name and the bytes of each of its
// buffer arguments, its grid, and a Go reference for fakes that simulate
// kernels in Go rather than compile them. Its source in each GPU language
// is in testdata (see Source).
type Kernel struct {
	Info                gpuhost.KernelInfo
	Groups, Threadgroup int
	// Reference runs the kernel over its whole grid on bufs, one float32
	// slice per parameter starting at the bound offset.
	Reference func(bufs [][]float32)
}

// The suite's kernel sizes.
const (
	saxpyN     = 1000
	sumBlocks  = 4
	sumPerBlk  = 1024
	sumThreads = 256
	accN       = 256
)

// Kernels returns the suite's kernels: saxpy (y = a·x + y over 1000
// elements, a guarded partial last block), a block sum with shared memory
// and barriers (4 blocks of 256 threads, each summing 1024 values), and
// acc += x (the replay check).
func Kernels() []Kernel {
	return []Kernel{
		{Info: gpuhost.KernelInfo{Name: "conf_saxpy", ArgBytes: []int{4 * saxpyN, 4 * saxpyN, 4}},
			Groups: (saxpyN + 127) / 128, Threadgroup: 128,
			Reference: func(b [][]float32) {
				for i := range saxpyN {
					b[1][i] = b[2][0]*b[0][i] + b[1][i]
				}
			}},
		{Info: gpuhost.KernelInfo{Name: "conf_block_sum", ArgBytes: []int{4 * sumBlocks * sumPerBlk, 4 * sumBlocks}},
			Groups: sumBlocks, Threadgroup: sumThreads,
			Reference: func(b [][]float32) {
				for blk := range sumBlocks {
					var s float32
					for _, v := range b[0][blk*sumPerBlk : (blk+1)*sumPerBlk] {
						s += v
					}
					b[1][blk] = s
				}
			}},
		{Info: gpuhost.KernelInfo{Name: "conf_accumulate", ArgBytes: []int{4 * accN, 4 * accN}},
			Groups: accN / 64, Threadgroup: 64,
			Reference: func(b [][]float32) {
				for i := range accN {
					b[1][i] += b[0][i]
				}
			}},
	}
}

// Language is a device's kernel language, named by the extension of the
// suite's source file in it.
type Language string

// The languages of the devices that run the suite.
const (
	CUDA  Language = "cu"
	Metal Language = "metal"
)

// sources are the suite's kernels printed in each language. emit/gpu
// defines them in its IR and writes these files (its TestConformanceKernels,
// MLBUILD_UPDATE=1), failing when they are stale, so that the runtime's
// suite needs no compiler package.
//
//go:embed testdata/conformance.cu testdata/conformance.metal
var sources embed.FS

// SourceFile is the path, relative to this package's folder, of the
// suite's kernels in lang.
func SourceFile(lang Language) string { return "testdata/conformance." + string(lang) }

// Source returns the suite's kernels in lang and their infos.
func Source(lang Language) (string, []gpuhost.KernelInfo, error) {
	src, err := sources.ReadFile(SourceFile(lang))
	if err != nil {
		return "", nil, fmt.Errorf("gpuhosttest: no kernels in language %q: %v", lang, err)
	}
	var infos []gpuhost.KernelInfo
	for _, k := range Kernels() {
		infos = append(infos, k.Info)
	}
	return string(src), infos, nil
}
