package mps

import (
	"fmt"
	"unsafe"

	"github.com/mlbuild/mlbuild/rt/gpuhost"
)

// HostDevice is the Metal device of the GPU host program (rt/gpuhost) over an
// Engine. Apple GPUs share memory with the CPU: HostView hands out every
// buffer's contents, so the host reads and writes them in place and Upload
// and Download are plain copies. A sequence is re-encoded into one command
// buffer per launch, committed and waited for at once (Metal command
// buffers are not replayable, and one training step per command buffer is
// what the Metal program has always done).
type HostDevice struct {
	e *Engine
	// argBytes holds, per kernel of LoadKernels, the bytes each buffer
	// argument touches, which every dispatch is checked against.
	argBytes map[string][]int
}

// OpenHostDevice opens the system's default Metal GPU as a gpuhost.Device.
func OpenHostDevice() (gpuhost.Device, error) {
	e, err := Open()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", gpuhost.ErrNoDevice, err)
	}
	return &HostDevice{e: e}, nil
}

// NewHostDevice makes a HostDevice of an Engine (a fake's, in tests).
func NewHostDevice(e *Engine) *HostDevice { return &HostDevice{e: e} }

// deviceBuffer is a Buffer as a gpuhost.Buffer.
type deviceBuffer struct{ Buffer }

func (b deviceBuffer) Len() int { return int(b.Length()) }

func (d *HostDevice) buffer(b gpuhost.Buffer) (Buffer, error) {
	db, ok := b.(deviceBuffer)
	if !ok || db.IsNil() {
		return Buffer{}, fmt.Errorf("mps: a buffer of another device (%T)", b)
	}
	return db.Buffer, nil
}

func (d *HostDevice) Name() string { return d.e.DeviceName() }

func (d *HostDevice) Facts() []gpuhost.Fact {
	return []gpuhost.Fact{{Key: "device", Value: d.e.DeviceName()}, {Key: "memory", Value: "unified (shared with the CPU)"}}
}

func (d *HostDevice) Alloc(label string, n int) (gpuhost.Buffer, error) {
	b, err := d.e.NewBuffer(label, n)
	if err != nil {
		return nil, err
	}
	clear(unsafe.Slice((*byte)(b.Contents()), n))
	return deviceBuffer{b}, nil
}

func (d *HostDevice) Free(b gpuhost.Buffer) error {
	buf, err := d.buffer(b)
	if err != nil {
		return err
	}
	return d.e.ReleaseBuffer(buf)
}

func (d *HostDevice) HostView(b gpuhost.Buffer) []byte {
	buf, err := d.buffer(b)
	if err != nil {
		return nil
	}
	return unsafe.Slice((*byte)(buf.Contents()), int(buf.Length()))
}

// span checks that n bytes from off lie inside b.
func (d *HostDevice) span(b gpuhost.Buffer, off, n int) ([]byte, error) {
	v := d.HostView(b)
	if v == nil {
		return nil, fmt.Errorf("mps: a buffer of another device (%T)", b)
	}
	if off < 0 || n < 0 || off+n > len(v) {
		return nil, fmt.Errorf("mps: %d bytes at offset %d of a %d-byte buffer", n, off, len(v))
	}
	return v[off : off+n], nil
}

func (d *HostDevice) Upload(b gpuhost.Buffer, off int, src []byte) error {
	dst, err := d.span(b, off, len(src))
	if err != nil {
		return err
	}
	copy(dst, src)
	return nil
}

func (d *HostDevice) Download(dst []byte, b gpuhost.Buffer, off int) error {
	src, err := d.span(b, off, len(dst))
	if err != nil {
		return err
	}
	copy(dst, src)
	return nil
}

func (d *HostDevice) LoadKernels(source string, kernels []gpuhost.KernelInfo) error {
	if err := d.e.LoadLibrary(source); err != nil {
		return fmt.Errorf("compiling the Metal kernels: %w", err)
	}
	if d.argBytes == nil {
		d.argBytes = map[string][]int{}
	}
	for _, k := range kernels {
		if _, err := d.e.Pipeline(k.Name); err != nil {
			return fmt.Errorf("making the pipeline of kernel %s: %w", k.Name, err)
		}
		d.argBytes[k.Name] = k.ArgBytes
	}
	return nil
}

// sequence is a recorded sequence: its encode function, run again into a
// new command buffer at each launch.
type sequence struct {
	d      *HostDevice
	name   string
	encode func(gpuhost.Encoder) error
}

func (d *HostDevice) Record(name string, encode func(gpuhost.Encoder) error) (gpuhost.Sequence, error) {
	return &sequence{d: d, name: name, encode: encode}, nil
}

// Launch encodes the sequence into one command buffer, commits it once and
// waits once (Metal's completion is where its errors show).
func (s *sequence) Launch() error {
	st, err := s.d.e.Begin(s.name)
	if err != nil {
		return err
	}
	err = s.encode(&encoder{d: s.d, s: st})
	// Commit and wait even after an encoding error, so the step closes.
	if cerr := st.Commit(); err == nil {
		err = cerr
	}
	if werr := st.Wait(); err == nil {
		err = werr
	}
	return err
}

// Sync has nothing to wait for: every launch has waited.
func (d *HostDevice) Sync() error { return nil }

func (d *HostDevice) Close() error { return d.e.Close() }

// encoder encodes a sequence's ops into one Step.
type encoder struct {
	d     *HostDevice
	s     *Step
	binds []Binding
}

func (en *encoder) Dispatch(kernel string, args []gpuhost.Arg, groups, threads int) error {
	need, ok := en.d.argBytes[kernel]
	if !ok {
		return fmt.Errorf("mps: kernel %q was not loaded by LoadKernels", kernel)
	}
	if len(args) != len(need) {
		return fmt.Errorf("mps: kernel %q takes %d buffers, %d given", kernel, len(need), len(args))
	}
	en.binds = en.binds[:0]
	for i, a := range args {
		buf, err := en.d.buffer(a.Buf)
		if err != nil {
			return err
		}
		// The kernel touches what its constant shapes say, whatever the
		// argument claims: Binding checks the larger fits.
		en.binds = append(en.binds, Binding{Buffer: buf, Offset: a.Offset, Bytes: max(a.Bytes, need[i])})
	}
	return en.s.DispatchThreadgroups(kernel, en.binds, Size{Width: uint(groups), Height: 1, Depth: 1},
		Size{Width: uint(threads), Height: 1, Depth: 1}, nil)
}

// Conv refuses every library convolution: the Metal device has none
// (MPS's convolution kernels are not bound), and the planner lowers a
// Metal plan's convolutions to im2col and GEMMs instead (its Target
// offers no ConvLibrary).
func (en *encoder) Conv(c gpuhost.Conv) error {
	return fmt.Errorf("mps: a %v convolution (%v) as a library call: the Metal device has no library convolutions; the Metal backend lowers convolutions to im2col and GEMMs (a bug in mlbuild if a Metal program asks for one)", c.Product, c.Geom)
}

// Gemm encodes one MPS matrix multiplication, or for a batched GEMM one
// per matrix of the batch. Its matrices are float32 MPSMatrix objects,
// multiplied in float32: a GEMM in another precision, or of bfloat16
// operands, is refused (the planner keeps Metal's steps in f32 and says
// why; MPSMatrix's bfloat16 type needs macOS 14, which this device does
// not require).
func (en *encoder) Gemm(g gpuhost.Gemm) error {
	if err := g.CheckElems(false); err != nil {
		return fmt.Errorf("mps: a %dx%dx%d GEMM: %w", g.M, g.N, g.K, err)
	}
	if g.Precision != gpuhost.PrecisionF32 {
		return fmt.Errorf("mps: a %dx%dx%d GEMM in precision %v: the Metal device multiplies float32 MPS matrices in f32 only", g.M, g.N, g.K, g.Precision)
	}
	for b := range max(g.Batch, 1) {
		var ops [3]MatrixOperand
		for i, o := range []gpuhost.Operand{g.A, g.B, g.C} {
			buf, err := en.d.buffer(o.Buf)
			if err != nil {
				return err
			}
			if b > 0 && o.MatrixBytes <= 0 {
				return fmt.Errorf("mps: a batched GEMM of %d matrices whose operand %d has no matrix stride", g.Batch, i)
			}
			ops[i] = MatrixOperand{Buffer: buf, Offset: o.Offset + b*o.MatrixBytes, RowBytes: o.RowBytes}
		}
		if err := en.s.Gemm(GemmSpec{TransA: g.TransA, TransB: g.TransB, M: g.M, N: g.N, K: g.K,
			Alpha: float64(g.Alpha), Beta: float64(g.Beta), A: ops[0], B: ops[1], C: ops[2]}); err != nil {
			return err
		}
	}
	return nil
}
