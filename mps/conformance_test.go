package mps_test

import (
	"testing"
	"unsafe"

	"github.com/mlbuild/mlbuild/mps"
	"github.com/mlbuild/mlbuild/mps/fakemetal"
	"github.com/mlbuild/mlbuild/rt/gpuhost"
	"github.com/mlbuild/mlbuild/rt/gpuhost/gpuhosttest"
)

// TestConformanceOnFake holds the Metal device to the contract every
// gpuhost.Device keeps (the suite the CUDA device passes too), on the
// recording fake of Metal, which runs the suite's kernels through their Go
// references and checks Metal's protocol besides.
func TestConformanceOnFake(t *testing.T) {
	fakes := map[gpuhost.Device]*fakemetal.Fake{}
	var ks []fakemetal.Kernel
	for _, k := range gpuhosttest.Kernels() {
		ref := k.Reference
		ks = append(ks, fakemetal.Kernel{Name: k.Info.Name, BufferBytes: k.Info.ArgBytes,
			Run: func(buffers [][]byte, _ []byte, _, _ mps.Size) {
				bufs := make([][]float32, len(buffers))
				for i, b := range buffers {
					if len(b) >= 4 {
						bufs[i] = unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
					}
				}
				ref(bufs)
			}})
	}
	gpuhosttest.Run(t, gpuhosttest.Suite{
		Language: gpuhosttest.Metal,
		Open: func(t *testing.T) gpuhost.Device {
			f := fakemetal.New(ks...)
			e, err := mps.NewEngine(f)
			if err != nil {
				t.Fatal(err)
			}
			d := mps.NewHostDevice(e)
			fakes[d] = f
			t.Cleanup(func() {
				if err := f.Check(); err != nil {
					t.Error(err)
				}
			})
			return d
		},
		FailNextLaunch: func(d gpuhost.Device) {
			f := fakes[d]
			f.FailCommandBuffer(f.Stats().CommandBuffers+1, "Execution of the command buffer was aborted due to an error during execution")
		},
	})
}
