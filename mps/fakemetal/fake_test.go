package fakemetal_test

import (
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/mps"
	"github.com/mlbuild/mlbuild/mps/fakemetal"
)

const source = "kernel void scale(device float *x [[buffer(0)]], constant float &s [[buffer(1)]], uint i [[thread_position_in_grid]]) {}\n"

// scale touches 64 floats of its buffer and takes a 4-byte constant.
var scale = fakemetal.Kernel{Name: "scale", BufferBytes: []int{256}, ConstantBytes: 4}

var (
	one  = mps.Size{Width: 1, Height: 1, Depth: 1}
	grid = mps.Size{Width: 64, Height: 1, Depth: 1}
	four = []byte{0, 0, 128, 63}
)

// rig is the typed wrappers on a fake device, for sending call sequences
// that the Engine would never send.
type rig struct {
	f     *fakemetal.Fake
	dev   mps.Device
	queue mps.CommandQueue
	pipe  mps.ComputePipelineState
	pool  mps.AutoreleasePool
	buf   mps.Buffer
}

func newRig(t *testing.T) *rig {
	t.Helper()
	f := fakemetal.New(scale)
	dev, err := mps.CreateSystemDefaultDevice(f)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{f: f, dev: dev, queue: dev.NewCommandQueue()}
	r.pool = dev.NewAutoreleasePool()
	lib, err := dev.NewLibraryWithSource(source)
	if err != nil {
		t.Fatal(err)
	}
	fn, ok := lib.NewFunctionWithName("scale")
	if !ok {
		t.Fatal("no function scale")
	}
	if r.pipe, err = dev.NewComputePipelineStateWithFunction(fn); err != nil {
		t.Fatal(err)
	}
	r.buf = dev.NewBufferWithLength(256, mps.ResourceStorageModeShared)
	return r
}

// dispatch encodes one correct dispatch of scale on buf at offset.
func (r *rig) dispatch(cb mps.CommandBuffer, buf mps.Buffer, offset uint) mps.ComputeCommandEncoder {
	enc := cb.ComputeCommandEncoder()
	enc.SetComputePipelineState(r.pipe)
	enc.SetBuffer(buf, offset, 0)
	enc.SetBytes(four, 1)
	enc.DispatchThreads(grid, grid)
	return enc
}

// gemm encodes a 4x4x4 GEMM over buf on cb.
func (r *rig) gemm(cb mps.CommandBuffer, buf mps.Buffer) {
	desc := r.dev.MatrixDescriptorWithRows(4, 4, 16)
	m := r.dev.NewMatrixWithBuffer(buf, 0, desc)
	k := r.dev.NewMatrixMultiplication(false, false, 4, 4, 4, 1, 0)
	k.EncodeToCommandBuffer(cb, m, m, m)
	k.Release()
	m.Release()
}

func TestCorrectSequenceHasNoViolation(t *testing.T) {
	r := newRig(t)
	cb := r.queue.CommandBuffer()
	r.dispatch(cb, r.buf, 0).EndEncoding()
	r.gemm(cb, r.buf)
	cb.Commit()
	cb.WaitUntilCompleted()
	if st := cb.Status(); st != mps.CommandBufferStatusCompleted {
		t.Errorf("status %v, want completed", st)
	}
	r.pool.Drain()
	if err := r.f.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestBrokenSequencesAreCaught breaks the protocol once per case and
// expects exactly that rule to be reported.
func TestBrokenSequencesAreCaught(t *testing.T) {
	for _, tc := range []struct {
		name  string
		check fakemetal.Check
		run   func(r *rig)
	}{
		{"buffer released before binding", fakemetal.CheckBufferAlive, func(r *rig) {
			b := r.dev.NewBufferWithLength(256, mps.ResourceStorageModeShared)
			b.Release()
			cb := r.queue.CommandBuffer()
			r.dispatch(cb, b, 0).EndEncoding()
			cb.Commit()
			cb.WaitUntilCompleted()
		}},
		{"buffer too small for the kernel", fakemetal.CheckBufferSize, func(r *rig) {
			cb := r.queue.CommandBuffer()
			r.dispatch(cb, r.buf, 4).EndEncoding()
			cb.Commit()
			cb.WaitUntilCompleted()
		}},
		{"argument not bound", fakemetal.CheckBinding, func(r *rig) {
			cb := r.queue.CommandBuffer()
			enc := cb.ComputeCommandEncoder()
			enc.SetComputePipelineState(r.pipe)
			enc.SetBytes(four, 1)
			enc.DispatchThreads(grid, grid)
			enc.EndEncoding()
			cb.Commit()
			cb.WaitUntilCompleted()
		}},
		{"constants of the wrong size", fakemetal.CheckBinding, func(r *rig) {
			cb := r.queue.CommandBuffer()
			enc := cb.ComputeCommandEncoder()
			enc.SetComputePipelineState(r.pipe)
			enc.SetBuffer(r.buf, 0, 0)
			enc.SetBytes([]byte{1, 2, 3, 4, 5, 6, 7, 8}, 1)
			enc.DispatchThreads(grid, grid)
			enc.EndEncoding()
			cb.Commit()
			cb.WaitUntilCompleted()
		}},
		{"threadgroup too large", fakemetal.CheckThreadgroup, func(r *rig) {
			cb := r.queue.CommandBuffer()
			enc := cb.ComputeCommandEncoder()
			enc.SetComputePipelineState(r.pipe)
			enc.SetBuffer(r.buf, 0, 0)
			enc.SetBytes(four, 1)
			enc.DispatchThreads(grid, mps.Size{Width: 2048, Height: 1, Depth: 1})
			enc.EndEncoding()
			cb.Commit()
			cb.WaitUntilCompleted()
		}},
		{"encoder not ended before commit", fakemetal.CheckEncoderEnded, func(r *rig) {
			cb := r.queue.CommandBuffer()
			r.dispatch(cb, r.buf, 0)
			cb.Commit()
			cb.WaitUntilCompleted()
		}},
		{"encoder ended twice", fakemetal.CheckEncoderEnded, func(r *rig) {
			cb := r.queue.CommandBuffer()
			enc := r.dispatch(cb, r.buf, 0)
			enc.EndEncoding()
			enc.EndEncoding()
			cb.Commit()
			cb.WaitUntilCompleted()
		}},
		{"MPS encode inside a compute encoder", fakemetal.CheckMPSOutsideEncoder, func(r *rig) {
			cb := r.queue.CommandBuffer()
			enc := r.dispatch(cb, r.buf, 0)
			r.gemm(cb, r.buf)
			enc.EndEncoding()
			cb.Commit()
			cb.WaitUntilCompleted()
		}},
		{"GEMM larger than its matrices", fakemetal.CheckGemmShape, func(r *rig) {
			cb := r.queue.CommandBuffer()
			m := r.dev.NewMatrixWithBuffer(r.buf, 0, r.dev.MatrixDescriptorWithRows(4, 4, 16))
			k := r.dev.NewMatrixMultiplication(false, false, 8, 4, 4, 1, 0)
			k.EncodeToCommandBuffer(cb, m, m, m)
			k.Release()
			m.Release()
			cb.Commit()
			cb.WaitUntilCompleted()
		}},
		{"matrix past the end of its buffer", fakemetal.CheckBufferSize, func(r *rig) {
			r.dev.NewMatrixWithBuffer(r.buf, 16, r.dev.MatrixDescriptorWithRows(8, 8, 32)).Release()
		}},
		{"committed twice", fakemetal.CheckOneCommit, func(r *rig) {
			cb := r.queue.CommandBuffer()
			cb.Commit()
			cb.Commit()
			cb.WaitUntilCompleted()
		}},
		{"next step begun before the wait", fakemetal.CheckOneCommit, func(r *rig) {
			cb := r.queue.CommandBuffer()
			cb.Commit()
			cb2 := r.queue.CommandBuffer()
			cb.WaitUntilCompleted()
			cb2.Commit()
			cb2.WaitUntilCompleted()
		}},
		{"never committed", fakemetal.CheckOneCommit, func(r *rig) {
			r.queue.CommandBuffer()
		}},
		{"waited twice", fakemetal.CheckOneWait, func(r *rig) {
			cb := r.queue.CommandBuffer()
			cb.Commit()
			cb.WaitUntilCompleted()
			cb.WaitUntilCompleted()
		}},
		{"wait before commit", fakemetal.CheckOneWait, func(r *rig) {
			cb := r.queue.CommandBuffer()
			cb.WaitUntilCompleted()
			cb.Commit()
		}},
		{"never waited", fakemetal.CheckOneWait, func(r *rig) {
			r.queue.CommandBuffer().Commit()
		}},
		{"released twice", fakemetal.CheckDoubleRelease, func(r *rig) {
			b := r.dev.NewBufferWithLength(16, mps.ResourceStorageModeShared)
			b.Release()
			b.Release()
		}},
		{"matrix released twice", fakemetal.CheckDoubleRelease, func(r *rig) {
			m := r.dev.NewMatrixWithBuffer(r.buf, 0, r.dev.MatrixDescriptorWithRows(4, 4, 16))
			m.Release()
			m.Release()
		}},
		{"message after free", fakemetal.CheckUseAfterRelease, func(r *rig) {
			b := r.dev.NewBufferWithLength(16, mps.ResourceStorageModeShared)
			b.Release()
			b.Length()
		}},
		{"CPU write to a buffer in flight", fakemetal.CheckInFlightWrite, func(r *rig) {
			cb := r.queue.CommandBuffer()
			r.dispatch(cb, r.buf, 0).EndEncoding()
			cb.Commit()
			r.buf.Float32s()[3] = 42
			cb.WaitUntilCompleted()
		}},
		{"private storage", fakemetal.CheckStorage, func(r *rig) {
			r.dev.NewBufferWithLength(16, 2<<4).Release()
		}},
		{"autoreleased with no pool", fakemetal.CheckAutorelease, func(r *rig) {
			r.pool.Drain()
			r.pool = r.dev.NewAutoreleasePool()
			inner := r.dev.NewAutoreleasePool()
			r.pool.Drain() // out of order: inner is still open
			inner.Drain()
			r.pool = r.dev.NewAutoreleasePool()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			tc.run(r)
			r.pool.Drain()
			err := r.f.Check()
			if err == nil {
				t.Fatalf("no violation, want %s", tc.check)
			}
			if !strings.Contains(err.Error(), "\n"+string(tc.check)+": ") {
				t.Fatalf("violations do not include %s:\n%v", tc.check, err)
			}
		})
	}
}
