package mps

import (
	"errors"
	"fmt"
	"runtime"
)

// Engine runs a generated program's training steps on one GPU: it owns the
// device, the command queue, the compiled kernels (pipelines cached per
// kernel name for the run), the MPS GEMM kernels and matrices (cached per
// shape and buffer), and the buffers it allocated. One step at a time.
type Engine struct {
	dev       Device
	queue     CommandQueue
	libraries []Library
	pipelines map[string]ComputePipelineState
	gemms     map[gemmKey]MatrixMultiplication
	matrices  map[matrixKey]Matrix
	buffers   []Buffer
	open      *Step
	closed    bool
}

type gemmKey struct {
	transA, transB bool
	m, n, k        int
	alpha, beta    float64
}

type matrixKey struct {
	buf                          ID
	offset, rows, cols, rowBytes int
}

// Open starts the Engine on the system's default GPU. On a machine without
// Metal the error wraps ErrNoDevice, whose text tells the user to rebuild
// with --backend cpu.
func Open() (*Engine, error) {
	m, err := SystemMessenger()
	if err != nil {
		return nil, err
	}
	return NewEngine(m)
}

// NewEngine starts the Engine on the default device that m reports; tests
// pass the fake in mps/fakemetal.
func NewEngine(m Messenger) (*Engine, error) {
	dev, err := CreateSystemDefaultDevice(m)
	if err != nil {
		return nil, err
	}
	return &Engine{
		dev:       dev,
		queue:     dev.NewCommandQueue(),
		pipelines: map[string]ComputePipelineState{},
		gemms:     map[gemmKey]MatrixMultiplication{},
		matrices:  map[matrixKey]Matrix{},
	}, nil
}

// Device is the GPU the Engine runs on, for callers that need the typed
// wrappers directly.
func (e *Engine) Device() Device { return e.dev }

// DeviceName is the GPU's name, for logs and the selftest header.
func (e *Engine) DeviceName() string {
	defer e.withPool()()
	return e.dev.Name()
}

// NewBuffer allocates length bytes of shared (unified) memory. The Engine
// owns it and releases it in Close; do not Release it yourself.
func (e *Engine) NewBuffer(label string, length int) (Buffer, error) {
	if length <= 0 {
		return Buffer{}, fmt.Errorf("mps: buffer %q: length %d bytes, want > 0", label, length)
	}
	buf := e.dev.NewBufferWithLength(uint(length), ResourceStorageModeShared)
	if buf.IsNil() {
		return Buffer{}, fmt.Errorf("mps: buffer %q: Metal could not allocate %d bytes", label, length)
	}
	if label != "" {
		buf.SetLabel(label)
	}
	e.buffers = append(e.buffers, buf)
	return buf, nil
}

// ReleaseBuffer gives back a buffer of NewBuffer before Close, with the
// GEMM operands cached on it.
func (e *Engine) ReleaseBuffer(buf Buffer) error {
	for i, b := range e.buffers {
		if b.id != buf.id {
			continue
		}
		e.buffers = append(e.buffers[:i], e.buffers[i+1:]...)
		for k, m := range e.matrices {
			if k.buf == buf.id {
				m.Release()
				delete(e.matrices, k)
			}
		}
		buf.Release()
		return nil
	}
	return fmt.Errorf("mps: ReleaseBuffer of a buffer this engine did not make or already released")
}

// DoubleBuffer is two shared buffers of the same size for the input batch:
// the data loader fills Next while the GPU reads Current, and Swap after
// the step's Wait exchanges them, so loading overlaps compute with no copy.
type DoubleBuffer struct {
	bufs    [2]Buffer
	current int
}

// NewDoubleBuffer allocates the two buffers of a DoubleBuffer, labelled
// label.0 and label.1.
func (e *Engine) NewDoubleBuffer(label string, length int) (*DoubleBuffer, error) {
	d := &DoubleBuffer{}
	for i := range d.bufs {
		buf, err := e.NewBuffer(fmt.Sprintf("%s.%d", label, i), length)
		if err != nil {
			return nil, err
		}
		d.bufs[i] = buf
	}
	return d, nil
}

// Current is the buffer the step being encoded (or running) reads.
func (d *DoubleBuffer) Current() Buffer { return d.bufs[d.current] }

// Next is the buffer the loader may fill while the GPU runs the current
// step.
func (d *DoubleBuffer) Next() Buffer { return d.bufs[1-d.current] }

// Swap makes Next the Current buffer; call it after the step's Wait.
func (d *DoubleBuffer) Swap() { d.current = 1 - d.current }

// LoadLibrary compiles Metal Shading Language source (the program's
// generated kernels). Kernel names are looked up in the libraries in the
// order they were loaded.
func (e *Engine) LoadLibrary(source string) error {
	defer e.withPool()()
	lib, err := e.dev.NewLibraryWithSource(source)
	if err != nil {
		return fmt.Errorf("mps: %w", err)
	}
	e.libraries = append(e.libraries, lib)
	return nil
}

// withPool locks the goroutine to its thread and pushes an autorelease
// pool; the function it returns drains the pool and unlocks. Use it as
// defer e.withPool()().
func (e *Engine) withPool() func() {
	runtime.LockOSThread()
	pool := e.dev.NewAutoreleasePool()
	return func() {
		pool.Drain()
		runtime.UnlockOSThread()
	}
}

// Pipeline returns the compute pipeline of kernel, making it on first use
// and caching it for the run. Calling it for every kernel at start moves
// compile errors before the first step.
func (e *Engine) Pipeline(kernel string) (ComputePipelineState, error) {
	if p, ok := e.pipelines[kernel]; ok {
		return p, nil
	}
	defer e.withPool()()
	for _, lib := range e.libraries {
		f, ok := lib.NewFunctionWithName(kernel)
		if !ok {
			continue
		}
		p, err := e.dev.NewComputePipelineStateWithFunction(f)
		f.Release()
		if err != nil {
			return ComputePipelineState{}, fmt.Errorf("mps: kernel %q: %w", kernel, err)
		}
		e.pipelines[kernel] = p
		return p, nil
	}
	return ComputePipelineState{}, fmt.Errorf("mps: kernel %q: no such function in the %d loaded Metal libraries", kernel, len(e.libraries))
}

// Close releases everything the Engine made. A step still open is an error.
func (e *Engine) Close() error {
	if e.closed {
		return nil
	}
	if e.open != nil {
		return fmt.Errorf("mps: Close with step %q still open (Commit and Wait it first)", e.open.name)
	}
	e.closed = true
	for _, m := range e.matrices {
		m.Release()
	}
	for _, k := range e.gemms {
		k.Release()
	}
	for _, p := range e.pipelines {
		p.Release()
	}
	for _, l := range e.libraries {
		l.Release()
	}
	for _, b := range e.buffers {
		b.Release()
	}
	e.queue.Release()
	e.dev.Release()
	return nil
}

// stepState is where a Step is in its life: encoding, committed, done.
type stepState int

const (
	stepEncoding stepState = iota
	stepCommitted
	stepDone
)

// Step is one command buffer: every dispatch and GEMM of a training step,
// committed once and waited for once, inside one autorelease pool. Its
// goroutine is locked to its OS thread from Begin to Wait because the pool
// belongs to the thread.
type Step struct {
	e        *Engine
	name     string
	pool     AutoreleasePool
	cb       CommandBuffer
	enc      ComputeCommandEncoder
	encoding bool
	pipeline ID
	state    stepState
}

// Begin opens a step named name (the name appears in its errors and in GPU
// captures). Only one step is open at a time.
func (e *Engine) Begin(name string) (*Step, error) {
	if e.closed {
		return nil, fmt.Errorf("mps: step %q: engine is closed", name)
	}
	if e.open != nil {
		return nil, fmt.Errorf("mps: step %q: step %q is still open (Commit and Wait it first)", name, e.open.name)
	}
	runtime.LockOSThread()
	s := &Step{e: e, name: name}
	s.pool = e.dev.NewAutoreleasePool()
	s.cb = e.queue.CommandBuffer()
	s.cb.SetLabel(name)
	e.open = s
	return s, nil
}

// Binding is one buffer argument of a kernel: the buffer and the byte
// offset where the kernel's data starts. Bytes, when not zero, is how many
// bytes the kernel touches from Offset; Dispatch checks it fits.
type Binding struct {
	Buffer Buffer
	Offset int
	Bytes  int
}

// errorf prefixes a message with the step's name.
func (s *Step) errorf(format string, args ...any) error {
	return fmt.Errorf("mps: step %q: "+format, append([]any{s.name}, args...)...)
}

func (s *Step) checkEncoding(what string) error {
	switch s.state {
	case stepCommitted:
		return s.errorf("%s after Commit", what)
	case stepDone:
		return s.errorf("%s after Wait", what)
	}
	return nil
}

// Dispatch encodes kernel over grid threads (partial threadgroups allowed)
// in threadgroups of the given size. bindings[i] is bound at buffer index
// i; constants, when not empty, are copied in at index len(bindings).
// Consecutive dispatches share one compute encoder.
func (s *Step) Dispatch(kernel string, bindings []Binding, grid, threadgroup Size, constants []byte) error {
	return s.dispatch(kernel, bindings, grid, threadgroup, constants, false)
}

// DispatchThreadgroups is Dispatch with groups counted in whole
// threadgroups rather than threads; the kernel checks its own bounds.
func (s *Step) DispatchThreadgroups(kernel string, bindings []Binding, groups, threadgroup Size, constants []byte) error {
	return s.dispatch(kernel, bindings, groups, threadgroup, constants, true)
}

func (s *Step) dispatch(kernel string, bindings []Binding, grid, threadgroup Size, constants []byte, groups bool) error {
	if err := s.checkEncoding("dispatch of kernel " + kernel); err != nil {
		return err
	}
	p, err := s.e.Pipeline(kernel)
	if err != nil {
		return s.errorf("%w", err)
	}
	tg := threadgroup.Width * threadgroup.Height * threadgroup.Depth
	if tg == 0 || tg > p.MaxTotalThreadsPerThreadgroup() {
		return s.errorf("kernel %q: threadgroup %dx%dx%d, want 1 to %d threads", kernel, threadgroup.Width, threadgroup.Height, threadgroup.Depth, p.MaxTotalThreadsPerThreadgroup())
	}
	if grid.Width*grid.Height*grid.Depth == 0 {
		return s.errorf("kernel %q: empty grid %dx%dx%d", kernel, grid.Width, grid.Height, grid.Depth)
	}
	for i, bnd := range bindings {
		if bnd.Buffer.IsNil() {
			return s.errorf("kernel %q: buffer argument %d is nil", kernel, i)
		}
		length := int(bnd.Buffer.Length())
		if bnd.Offset < 0 || bnd.Bytes < 0 || bnd.Offset+bnd.Bytes > length || bnd.Offset >= length {
			return s.errorf("kernel %q: buffer argument %d: bytes [%d, %d) outside the buffer's %d bytes", kernel, i, bnd.Offset, bnd.Offset+bnd.Bytes, length)
		}
	}
	if len(constants) > 4096 {
		return s.errorf("kernel %q: %d bytes of constants, setBytes takes at most 4096", kernel, len(constants))
	}
	if !s.encoding {
		s.enc = s.cb.ComputeCommandEncoder()
		s.encoding = true
		s.pipeline = 0
	}
	if s.pipeline != p.id {
		s.enc.SetComputePipelineState(p)
		s.pipeline = p.id
	}
	for i, bnd := range bindings {
		s.enc.SetBuffer(bnd.Buffer, uint(bnd.Offset), uint(i))
	}
	if len(constants) > 0 {
		s.enc.SetBytes(constants, uint(len(bindings)))
	}
	if groups {
		s.enc.DispatchThreadgroups(grid, threadgroup)
	} else {
		s.enc.DispatchThreads(grid, threadgroup)
	}
	return nil
}

// endEncoder closes the open compute encoder, if any.
func (s *Step) endEncoder() {
	if s.encoding {
		s.enc.EndEncoding()
		s.encoding = false
	}
}

// MatrixOperand is a float32 matrix stored row-major in a buffer from byte
// Offset on, its rows RowBytes apart (0 means packed: columns×4).
type MatrixOperand struct {
	Buffer   Buffer
	Offset   int
	RowBytes int
}

// GemmSpec is C = Alpha·op(A)·op(B) + Beta·C, where op(A) is M×K, op(B) is
// K×N and C is M×N. A is stored K×M when TransA, else M×K; B is stored N×K
// when TransB, else K×N. The transposes are MPS flags, never copies.
type GemmSpec struct {
	TransA, TransB bool
	M, N, K        int
	Alpha, Beta    float64
	A, B, C        MatrixOperand
}

// Gemm encodes one MPSMatrixMultiplication. It first ends an open compute
// encoder, since MPS encodes its own work on the command buffer.
func (s *Step) Gemm(g GemmSpec) error {
	if err := s.checkEncoding("GEMM"); err != nil {
		return err
	}
	if g.M <= 0 || g.N <= 0 || g.K <= 0 {
		return s.errorf("GEMM %dx%dx%d: sizes must be positive", g.M, g.N, g.K)
	}
	aRows, aCols := g.M, g.K
	if g.TransA {
		aRows, aCols = g.K, g.M
	}
	bRows, bCols := g.K, g.N
	if g.TransB {
		bRows, bCols = g.N, g.K
	}
	a, err := s.matrix("A", g.A, aRows, aCols)
	if err != nil {
		return err
	}
	b, err := s.matrix("B", g.B, bRows, bCols)
	if err != nil {
		return err
	}
	c, err := s.matrix("C", g.C, g.M, g.N)
	if err != nil {
		return err
	}
	key := gemmKey{g.TransA, g.TransB, g.M, g.N, g.K, g.Alpha, g.Beta}
	k, ok := s.e.gemms[key]
	if !ok {
		k = s.e.dev.NewMatrixMultiplication(g.TransA, g.TransB, uint(g.M), uint(g.N), uint(g.K), g.Alpha, g.Beta)
		s.e.gemms[key] = k
	}
	s.endEncoder()
	k.EncodeToCommandBuffer(s.cb, a, b, c)
	return nil
}

// matrix returns the cached MPSMatrix for op, checking it fits its buffer.
func (s *Step) matrix(name string, op MatrixOperand, rows, cols int) (Matrix, error) {
	if op.Buffer.IsNil() {
		return Matrix{}, s.errorf("GEMM operand %s: nil buffer", name)
	}
	rowBytes := op.RowBytes
	if rowBytes == 0 {
		rowBytes = cols * 4
	}
	length := int(op.Buffer.Length())
	end := op.Offset + (rows-1)*rowBytes + cols*4
	if rowBytes < cols*4 || rowBytes%4 != 0 || op.Offset < 0 || op.Offset%4 != 0 || end > length {
		return Matrix{}, s.errorf("GEMM operand %s: %dx%d float32 matrix at offset %d with row bytes %d needs bytes up to %d of a %d-byte buffer (offset and row bytes must be multiples of 4)", name, rows, cols, op.Offset, rowBytes, end, length)
	}
	key := matrixKey{op.Buffer.id, op.Offset, rows, cols, rowBytes}
	if m, ok := s.e.matrices[key]; ok {
		return m, nil
	}
	desc := s.e.dev.MatrixDescriptorWithRows(uint(rows), uint(cols), uint(rowBytes))
	m := s.e.dev.NewMatrixWithBuffer(op.Buffer, uint(op.Offset), desc)
	s.e.matrices[key] = m
	return m, nil
}

// Commit ends the open encoder and sends the step to the GPU. Call it once.
func (s *Step) Commit() error {
	if err := s.checkEncoding("Commit"); err != nil {
		return err
	}
	s.endEncoder()
	s.cb.Commit()
	s.state = stepCommitted
	return nil
}

// ErrStepFailed is wrapped by the error of a step whose command buffer the
// GPU reported as failed.
var ErrStepFailed = errors.New("command buffer failed")

// Wait blocks until the GPU has run the step, drains its autorelease pool
// and unlocks the thread. A failed command buffer becomes an error naming
// the step and carrying Metal's message.
func (s *Step) Wait() error {
	if s.state != stepCommitted {
		if s.state == stepDone {
			return s.errorf("Wait called twice")
		}
		return s.errorf("Wait before Commit")
	}
	s.cb.WaitUntilCompleted()
	var err error
	if st := s.cb.Status(); st != CommandBufferStatusCompleted {
		err = s.cb.Error(fmt.Sprintf("mps: step %q: %v (status %v)", s.name, ErrStepFailed, st))
		if err == nil {
			err = s.errorf("%w with status %v and no NSError", ErrStepFailed, st)
		}
		err = &stepError{err: err}
	}
	s.state = stepDone
	s.pool.Drain()
	s.e.open = nil
	runtime.UnlockOSThread()
	return err
}

// stepError keeps ErrStepFailed visible to errors.Is while the message is
// the NSError's text.
type stepError struct{ err error }

func (e *stepError) Error() string        { return e.err.Error() }
func (e *stepError) Is(target error) bool { return target == ErrStepFailed }
