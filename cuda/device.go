package cuda

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/mlbuild/mlbuild/rt/gpuhost"
)

// Device is an NVIDIA GPU as a gpuhost.Device. Its memory is the GPU's own:
// HostView returns nil, and the host program moves data with Upload and
// Download, which first wait for the launched sequences. A sequence is
// captured from the engine's stream into one CUDA graph when it is
// recorded, and each Launch is one cuGraphLaunch: the ops are checked and
// encoded once, and a training step costs one launch. With
// Options.Blocking a sequence is kept as its list of ops instead, each
// launched alone and waited for, so that a fault names its op; with
// Options.Profile too, the list is launched back to back and timed on the
// GPU (profile.go). Use a Device from one goroutine at a time.
type Device struct {
	e         *Engine
	kernels   map[string]deviceKernel
	sequences []*sequence
	// recording names the sequence being recorded, "" when none: the
	// stream is being captured and only Encoder calls are allowed.
	recording string
	// lastLaunched names the last sequence launched since the last Sync,
	// "" when none was.
	lastLaunched string
	launches     int
	closed       bool
	// prof sums the ops' GPU times of timed sequences (Options.Profile),
	// and timing holds the events their launches record (profile.go).
	prof   profile
	timing []Event
}

type deviceKernel struct {
	fn       Function
	argBytes []int
}

// OpenDevice opens GPU opts.Ordinal as a gpuhost.Device; the error of a
// machine without a usable GPU wraps ErrNoDevice (and so
// gpuhost.ErrNoDevice).
func OpenDevice(opts Options) (*Device, error) {
	e, err := Open(opts)
	if err != nil {
		return nil, err
	}
	return NewDevice(e), nil
}

// NewDevice makes a Device of an open Engine; Close closes the Engine.
func NewDevice(e *Engine) *Device { return &Device{e: e, kernels: map[string]deviceKernel{}} }

// Engine is the Device's Engine.
func (d *Device) Engine() *Engine { return d.e }

// buffer is a device allocation as a gpuhost.Buffer.
type buffer struct {
	d     *Device
	ptr   DevicePtr
	n     int
	label string
	freed bool
	users []string // the sequences recorded with it
}

// Len is the buffer's size in bytes.
func (b *buffer) Len() int { return b.n }

// buffer checks that b is a live buffer of this device.
func (d *Device) buffer(b gpuhost.Buffer, what string) (*buffer, error) {
	bb, ok := b.(*buffer)
	if !ok || bb == nil || bb.d != d {
		return nil, fmt.Errorf("cuda: %s: a buffer of another device (%T)", what, b)
	}
	if bb.freed {
		return nil, fmt.Errorf("cuda: %s: buffer %q was freed", what, bb.label)
	}
	return bb, nil
}

// Pointer is b's device address, for work outside the Encoder (a
// library call, another GPU's copy).
func (d *Device) Pointer(b gpuhost.Buffer) (DevicePtr, error) {
	bb, err := d.buffer(b, "Pointer")
	if err != nil {
		return 0, err
	}
	return bb.ptr, nil
}

// busy refuses what may not happen while a sequence is being recorded or
// after Close.
func (d *Device) busy(what string) error {
	if d.closed {
		return fmt.Errorf("cuda: %s: %w", what, errClosed)
	}
	if d.recording != "" {
		return fmt.Errorf("cuda: %s while sequence %q is being recorded: a recording captures only the Encoder's Dispatch, Gemm and Conv (CUDA stream capture allows no allocation, copy or wait)", what, d.recording)
	}
	return nil
}

// Name is the GPU's name as the driver reports it.
func (d *Device) Name() string { return d.e.Name() }

// FreeMemory is the GPU's free memory in bytes (cuMemGetInfo), for
// gpuhost's check before it allocates the arenas (gpuhost.MemoryReporter).
func (d *Device) FreeMemory() (int64, error) {
	free, _, err := d.e.MemInfo()
	return int64(min(free, 1<<62)), err
}

// Pin page-locks host memory the host program copies often (gpuhost.Pinner).
func (d *Device) Pin(b []byte) error { return d.e.Pin(b) }

// Facts lists the GPU, its memory, the driver, each library file loaded
// with its version, and how the kernels were compiled.
func (d *Device) Facts() []gpuhost.Fact {
	e := d.e
	major, minor := e.ComputeCapability()
	facts := []gpuhost.Fact{
		{Key: "device", Value: fmt.Sprintf("%s (GPU %d)", e.name, e.opts.Ordinal)},
		{Key: "compute capability", Value: fmt.Sprintf("%d.%d (sm_%d%d)", major, minor, major, minor)},
		{Key: "driver", Value: "CUDA " + versionString(e.driverVer)},
	}
	mem := fmt.Sprintf("%s total", gib(uint64(e.totalMem)))
	if !d.closed && d.recording == "" {
		if free, _, err := e.MemInfo(); err == nil {
			mem += fmt.Sprintf(", %s free", gib(free))
		}
	}
	facts = append(facts, gpuhost.Fact{Key: "memory", Value: mem})
	for _, f := range e.lib.Files {
		v := f.Version
		if f.Library == blasLibrary.name {
			v = e.blasVersion
		}
		where := f.Path
		if f.File != "" && f.File != f.Path {
			where = f.File + " (as " + f.Path + ")"
		}
		facts = append(facts, gpuhost.Fact{Key: f.Library, Value: where + ", version " + v})
	}
	if v := e.DNNVersion(); v != "" {
		facts = append(facts, gpuhost.Fact{Key: "convolutions", Value: "cuDNN " + v + ", per step's precision: f32 CUDNN_FMA_MATH (exact fp32), tf32 CUDNN_DEFAULT_MATH (TF32 tensor cores, fp32 sums), bf16 CUDNN_TENSOR_OP_MATH on bfloat16 tensors (fp32 sums, bfloat16 output); activations NCHW with filters KCRS, or NHWC with filters KRSC"})
		if a := e.ConvAlgorithms(); a != "" {
			facts = append(facts, gpuhost.Fact{Key: "cuDNN algorithms", Value: a})
		}
	}
	facts = append(facts, gpuhost.Fact{Key: "GEMM", Value: "cuBLAS " + e.blasVersion + ", per step's precision: f32 cublasSgemm (exact fp32); " +
		"bf16 cublasGemmEx CUBLAS_COMPUTE_32F_FAST_16BF (inputs rounded to bfloat16, fp32 sums), or CUDA_R_16BF inputs with CUBLAS_COMPUTE_32F where their producers wrote bfloat16; " +
		"tf32 cublasGemmEx CUBLAS_COMPUTE_32F_FAST_TF32 (inputs rounded to TF32, fp32 sums)"})
	for _, l := range e.loads {
		how := fmt.Sprintf("compiled by NVRTC %s in %v", e.nvrtcVersion, l.Took.Round(100_000))
		switch {
		case l.FromCache:
			how = fmt.Sprintf("from the cache in %v", l.Took.Round(10_000))
		case l.Parts > 1:
			how = fmt.Sprintf("%d parts, %d compiled by NVRTC %s (%d at once) and %d from the cache, in %v",
				l.Parts, l.Compiled, e.nvrtcVersion, l.Jobs, l.Parts-l.Compiled, l.Took.Round(100_000))
		}
		facts = append(facts, gpuhost.Fact{Key: "kernels", Value: l.Arch + ", " + how})
	}
	if e.cache.dir != "" {
		facts = append(facts, gpuhost.Fact{Key: "kernel cache", Value: e.cache.dir})
	} else {
		facts = append(facts, gpuhost.Fact{Key: "kernel cache", Value: "off"})
	}
	return facts
}

func gib(n uint64) string { return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30)) }

// Alloc allocates n zeroed bytes of GPU memory; label names the buffer in
// errors. It is refused while a sequence is being recorded.
func (d *Device) Alloc(label string, n int) (gpuhost.Buffer, error) {
	if err := d.busy(fmt.Sprintf("Alloc of %q", label)); err != nil {
		return nil, err
	}
	p, err := d.e.Alloc(n, fmt.Sprintf("buffer %q", label))
	if err != nil {
		return nil, err
	}
	return &buffer{d: d, ptr: p, n: n, label: label}, nil
}

// Free releases a buffer that no recorded sequence uses.
func (d *Device) Free(b gpuhost.Buffer) error {
	if err := d.busy("Free"); err != nil {
		return err
	}
	bb, err := d.buffer(b, "Free")
	if err != nil {
		return err
	}
	if len(bb.users) > 0 {
		return fmt.Errorf("cuda: Free of buffer %q, which recorded sequence %q uses", bb.label, bb.users[0])
	}
	bb.freed = true
	return d.e.Free(bb.ptr)
}

// HostView is nil: the GPU's memory is its own.
func (d *Device) HostView(gpuhost.Buffer) []byte { return nil }

// span checks that n bytes from off lie inside b.
func (d *Device) span(what string, b gpuhost.Buffer, off, n int) (*buffer, error) {
	if err := d.busy(what); err != nil {
		return nil, err
	}
	bb, err := d.buffer(b, what)
	if err != nil {
		return nil, err
	}
	if off < 0 || off+n > bb.n {
		return nil, fmt.Errorf("cuda: %s of %d bytes at offset %d of buffer %q, which has %d bytes", what, n, off, bb.label, bb.n)
	}
	return bb, nil
}

// Upload waits for the launched sequences, then copies src into b at off.
func (d *Device) Upload(b gpuhost.Buffer, off int, src []byte) error {
	bb, err := d.span("Upload", b, off, len(src))
	if err != nil {
		return err
	}
	return d.launched(d.e.CopyIn(bb.ptr+DevicePtr(off), src))
}

// Download waits for the launched sequences, then copies b from off into
// dst.
func (d *Device) Download(dst []byte, b gpuhost.Buffer, off int) error {
	bb, err := d.span("Download", b, off, len(dst))
	if err != nil {
		return err
	}
	return d.launched(d.e.CopyOut(dst, bb.ptr+DevicePtr(off)))
}

// kernelNames finds the kernels a CUDA source defines, for error messages.
var kernelNames = regexp.MustCompile(`__global__\s+void\s+(\w+)`)

// LoadKernels compiles the CUDA source (or takes it from the kernel cache),
// loads it, and finds every kernel of kernels, keeping its ArgBytes to
// check each Dispatch against.
func (d *Device) LoadKernels(source string, kernels []gpuhost.KernelInfo) error {
	if err := d.busy("LoadKernels"); err != nil {
		return err
	}
	if _, err := d.e.LoadModules(splitSource(source), d.e.opts.compileJobs()); err != nil {
		return fmt.Errorf("cuda: compiling the kernels for %s: %w", d.e.Name(), err)
	}
	for _, k := range kernels {
		fn, err := d.e.Function(k.Name)
		if err != nil {
			var defined []string
			for _, m := range kernelNames.FindAllStringSubmatch(source, -1) {
				defined = append(defined, m[1])
			}
			return fmt.Errorf("cuda: kernel %q is not in the program's source, which defines %d kernels (%s): %w",
				k.Name, len(defined), strings.Join(firstN(defined, 8), ", "), err)
		}
		d.kernels[k.Name] = deviceKernel{fn: fn, argBytes: slices.Clone(k.ArgBytes)}
	}
	return nil
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], "...")
	}
	return s
}

// sequence is a recorded sequence: an instantiated CUDA graph.
type sequence struct {
	d    *Device
	name string
	exec GraphExec // 0 for a sequence with no ops, or a blocking one
	// blocking: ops are launched one by one (Options.Blocking).
	blocking bool
	ops      []blockingOp
	runs     int // launches of a blocking sequence so far (the profile skips the first)
}

// blockingOp is one op of a sequence recorded with Options.Blocking: its
// name in errors ("op 3 (kernel mlb002_maxpool2d)") and its launch.
type blockingOp struct {
	name   string
	launch func() error
}

// Record captures the ops encode adds into one CUDA graph. The ops are
// checked as they are added; an error from encode or from the capture ends
// the capture and is returned, naming the sequence.
func (d *Device) Record(name string, encode func(gpuhost.Encoder) error) (gpuhost.Sequence, error) {
	if err := d.busy(fmt.Sprintf("Record of %q", name)); err != nil {
		return nil, err
	}
	if name == "" {
		name = fmt.Sprintf("sequence %d", len(d.sequences)+1)
	}
	// Waiting first keeps an earlier launch's failure out of this capture.
	if err := d.launched(d.e.Synchronize()); err != nil {
		return nil, err
	}
	enc := &encoder{d: d, seq: name, blocking: d.e.opts.Blocking}
	if enc.blocking {
		return d.recordBlocking(name, enc, encode)
	}
	// encode runs twice: first to prepare its library convolutions
	// (cuDNN's set-up allocates and may wait, which no capture allows),
	// then into the capture.
	err := func() error {
		d.recording = name
		defer func() { d.recording = "" }()
		return encode(&preparer{d: d})
	}()
	if err != nil {
		return nil, fmt.Errorf("cuda: recording sequence %q: %w", name, err)
	}
	if err := d.e.BeginCapture(); err != nil {
		return nil, fmt.Errorf("cuda: recording sequence %q: %w", name, err)
	}
	d.recording = name
	err = func() error {
		// A panicking encode must not leave the stream capturing.
		defer func() {
			if p := recover(); p != nil {
				d.recording = ""
				if exec, err := d.e.EndCapture(); err == nil {
					d.e.DestroyGraph(exec)
				}
				panic(p)
			}
		}()
		return encode(enc)
	}()
	d.recording = ""
	exec, endErr := d.e.EndCapture()
	if err == nil {
		err = endErr
	} else if endErr == nil {
		d.e.DestroyGraph(exec)
	}
	if err != nil {
		return nil, fmt.Errorf("cuda: recording sequence %q: %w", name, err)
	}
	if enc.ops == 0 {
		d.e.DestroyGraph(exec)
		exec = 0
	}
	return d.keep(&sequence{d: d, name: name, exec: exec}, enc.used), nil
}

// keep registers a recorded sequence and marks the buffers it uses.
func (d *Device) keep(s *sequence, used []*buffer) *sequence {
	for _, b := range used {
		if !slices.Contains(b.users, s.name) {
			b.users = append(b.users, s.name)
		}
	}
	d.sequences = append(d.sequences, s)
	return s
}

// Launch queues one run of the graph.
func (s *sequence) Launch() error {
	d := s.d
	if err := d.busy(fmt.Sprintf("Launch of %q", s.name)); err != nil {
		return err
	}
	if s.blocking {
		return s.launchBlocking()
	}
	if s.exec == 0 {
		return nil
	}
	if err := d.e.LaunchGraph(s.exec); err != nil {
		return fmt.Errorf("cuda: launching sequence %q: %w", s.name, err)
	}
	d.lastLaunched = s.name
	d.launches++
	return nil
}

// launched adds to err (from a call that waited for the stream) which
// sequences were launched since the last wait, and forgets them when the
// wait succeeded.
func (d *Device) launched(err error) error {
	if err == nil {
		d.lastLaunched, d.launches = "", 0
		return nil
	}
	if d.lastLaunched != "" {
		err = fmt.Errorf("cuda: %s failed running the %d sequence launches since the last wait (the last: sequence %q): %w; "+
			"each sequence runs as one CUDA graph, which does not say which of its kernels failed: run again with "+
			"MLBUILD_CUDA_BLOCKING=1 (every kernel launched alone and waited for: slow) to name it",
			d.e.Name(), d.launches, d.lastLaunched, err)
		d.lastLaunched, d.launches = "", 0
	}
	return err
}

// Call runs seq between the copies in and out (gpuhost.Caller): one graph
// launch and one wait for the whole exchange, the copies asynchronous on
// the engine's stream. A blocking sequence runs its parts one by one.
func (d *Device) Call(seq gpuhost.Sequence, in, out []gpuhost.Transfer) error {
	s, ok := seq.(*sequence)
	if !ok || s == nil || s.d != d {
		return fmt.Errorf("cuda: Call of a sequence of another device (%T)", seq)
	}
	if err := d.busy(fmt.Sprintf("Call of %q", s.name)); err != nil {
		return err
	}
	copies := func(ts []gpuhost.Transfer, what string) ([]HostCopy, error) {
		cs := make([]HostCopy, len(ts))
		for i, t := range ts {
			bb, err := d.span(fmt.Sprintf("%s %d of Call of %q", what, i, s.name), t.Buf, t.Off, len(t.Host))
			if err != nil {
				return nil, err
			}
			cs[i] = HostCopy{Dev: bb.ptr + DevicePtr(t.Off), Host: t.Host}
		}
		return cs, nil
	}
	ins, err := copies(in, "copy in")
	if err != nil {
		return err
	}
	outs, err := copies(out, "copy out")
	if err != nil {
		return err
	}
	if s.blocking {
		if err := d.launched(d.e.Call(ins, 0, nil)); err != nil {
			return err
		}
		if err := s.launchBlocking(); err != nil {
			return err
		}
		return d.launched(d.e.Call(nil, 0, outs))
	}
	if s.exec != 0 {
		d.lastLaunched = s.name
		d.launches++
	}
	return d.launched(d.e.Call(ins, s.exec, outs))
}

// Sync waits for every launched sequence; a failure names the last one.
func (d *Device) Sync() error {
	if err := d.busy("Sync"); err != nil {
		return err
	}
	return d.launched(d.e.Synchronize())
}

// Close destroys the graphs and closes the Engine, which frees every
// buffer. Calling it again does nothing.
func (d *Device) Close() error {
	if d.closed {
		return nil
	}
	if d.recording != "" {
		return d.busy("Close")
	}
	var first error
	if err := d.launched(d.e.Synchronize()); err != nil {
		first = err
	}
	for _, s := range d.sequences {
		if s.exec != 0 {
			if err := d.e.DestroyGraph(s.exec); err != nil && first == nil {
				first = err
			}
		}
	}
	if len(d.timing) > 0 {
		if err := d.e.DestroyEvents(d.timing); err != nil && first == nil {
			first = err
		}
		d.timing = nil
	}
	if d.e.opts.Profile {
		d.prof.write(d.e.opts.profileOut(), d.e.Name(), 40)
	}
	if err := d.e.Close(); err != nil && first == nil {
		first = err
	}
	d.closed = true
	return first
}

// encoder checks and captures the ops of the sequence being recorded.
type encoder struct {
	d        *Device
	seq      string
	ops      int
	used     []*buffer
	ptrs     []DevicePtr
	blocking bool         // keep the ops (Options.Blocking) instead of capturing them
	kept     []blockingOp // the kept ops
}

// add captures one op's launch, or keeps it for a blocking sequence.
func (en *encoder) add(name string, launch func() error) error {
	if en.blocking {
		en.kept = append(en.kept, blockingOp{name: name, launch: launch})
	} else if err := launch(); err != nil {
		return fmt.Errorf("cuda: %s: %w", name, err)
	}
	en.ops++
	return nil
}

func (en *encoder) use(b *buffer) {
	if !slices.Contains(en.used, b) {
		en.used = append(en.used, b)
	}
}

// Dispatch checks every argument against the kernel's KernelInfo (each
// binding's bytes, from its offset, inside its buffer) and captures the
// launch.
func (en *encoder) Dispatch(kernel string, args []gpuhost.Arg, groups, threads int) error {
	op := fmt.Sprintf("op %d (kernel %s)", en.ops, kernel)
	if en.d.recording != en.seq {
		return fmt.Errorf("cuda: %s: the encoder of sequence %q is used outside its Record", op, en.seq)
	}
	k, ok := en.d.kernels[kernel]
	if !ok {
		return fmt.Errorf("cuda: %s: kernel %q was not loaded by LoadKernels", op, kernel)
	}
	if len(args) != len(k.argBytes) {
		return fmt.Errorf("cuda: %s: %d buffer arguments, the kernel takes %d", op, len(args), len(k.argBytes))
	}
	if groups <= 0 || threads <= 0 || threads > 1024 || groups > 1<<31-1 {
		return fmt.Errorf("cuda: %s: %d blocks of %d threads, want at least 1 block of 1 to 1024 threads", op, groups, threads)
	}
	en.ptrs = en.ptrs[:0]
	for i, a := range args {
		b, err := en.d.buffer(a.Buf, fmt.Sprintf("%s, argument %d", op, i))
		if err != nil {
			return err
		}
		need := max(a.Bytes, k.argBytes[i])
		if a.Offset < 0 || a.Offset%4 != 0 || a.Bytes < 0 || a.Offset+need > b.n {
			return fmt.Errorf("cuda: %s, argument %d: bytes [%d, %d) of buffer %q, which has %d bytes (the kernel touches %d bytes there; offsets are multiples of 4)",
				op, i, a.Offset, a.Offset+need, b.label, b.n, k.argBytes[i])
		}
		en.use(b)
		en.ptrs = append(en.ptrs, b.ptr+DevicePtr(a.Offset))
	}
	e, ptrs := en.d.e, slices.Clone(en.ptrs)
	return en.add(op, func() error { return e.Launch(k.fn, groups, threads, ptrs) })
}

// Gemm checks the three operands fit their buffers and captures one
// cuBLAS GEMM.
func (en *encoder) Gemm(g gpuhost.Gemm) error {
	op := fmt.Sprintf("op %d (%dx%dx%d GEMM)", en.ops, g.M, g.N, g.K)
	batch := max(g.Batch, 1)
	if batch > 1 {
		op = fmt.Sprintf("op %d (%d %dx%dx%d GEMMs)", en.ops, batch, g.M, g.N, g.K)
	}
	if en.d.recording != en.seq {
		return fmt.Errorf("cuda: %s: the encoder of sequence %q is used outside its Record", op, en.seq)
	}
	if _, ok := computeTypes[g.Precision]; !ok && g.Precision != gpuhost.PrecisionF32 {
		return fmt.Errorf("cuda: %s: precision %v, which this device does not compute (f32, bf16 or tf32)", op, g.Precision)
	}
	if err := g.CheckElems(true); err != nil {
		return fmt.Errorf("cuda: %s: %w", op, err)
	}
	if g.M <= 0 || g.N <= 0 || g.K <= 0 || g.M > 1<<31-1 || g.N > 1<<31-1 || g.K > 1<<31-1 {
		return fmt.Errorf("cuda: %s: sizes must be positive", op)
	}
	rowsCols := func(t bool, r, c int) (int, int) {
		if t {
			return c, r
		}
		return r, c
	}
	ar, ac := rowsCols(g.TransA, g.M, g.K)
	br, bc := rowsCols(g.TransB, g.K, g.N)
	var ptrs [3]DevicePtr
	var lds, strides [3]int
	for i, o := range []struct {
		name       string
		x          gpuhost.Operand
		rows, cols int
	}{{"A", g.A, ar, ac}, {"B", g.B, br, bc}, {"C", g.C, g.M, g.N}} {
		b, err := en.d.buffer(o.x.Buf, op+", operand "+o.name)
		if err != nil {
			return err
		}
		es := o.x.Elem.Size() // 4 or 2: CheckElems refused the rest
		rowBytes := o.x.RowBytes
		if rowBytes == 0 {
			rowBytes = es * o.cols
		}
		end := o.x.Offset + (o.rows-1)*rowBytes + es*o.cols
		if rowBytes < es*o.cols || rowBytes%es != 0 || o.x.Offset < 0 || o.x.Offset%es != 0 || end > b.n {
			return fmt.Errorf("cuda: %s, operand %s: a %dx%d %v matrix at offset %d with rows %d bytes apart needs bytes up to %d of buffer %q, which has %d (offsets and row bytes are multiples of %d, rows at least %d bytes)",
				op, o.name, o.rows, o.cols, o.x.Elem, o.x.Offset, rowBytes, end, b.label, b.n, es, es*o.cols)
		}
		if batch > 1 {
			last := end + (batch-1)*o.x.MatrixBytes
			if o.x.MatrixBytes < 0 || o.x.MatrixBytes%es != 0 || last > b.n {
				return fmt.Errorf("cuda: %s, operand %s: %d matrices %d bytes apart from offset %d need bytes up to %d of buffer %q, which has %d (matrix strides are multiples of %d)",
					op, o.name, batch, o.x.MatrixBytes, o.x.Offset, last, b.label, b.n, es)
			}
		}
		en.use(b)
		ptrs[i], lds[i], strides[i] = b.ptr+DevicePtr(o.x.Offset), rowBytes/es, o.x.MatrixBytes/es
	}
	e, args := en.d.e, GemmArgs{TransA: g.TransA, TransB: g.TransB, M: g.M, N: g.N, K: g.K, Alpha: g.Alpha, Beta: g.Beta,
		A: ptrs[0], B: ptrs[1], C: ptrs[2], LDA: lds[0], LDB: lds[1], LDC: lds[2], Precision: g.Precision, Elem: g.A.Elem}
	if batch > 1 {
		args.Batch, args.StrideA, args.StrideB, args.StrideC = batch, strides[0], strides[1], strides[2]
	}
	return en.add(op, func() error { return e.Gemm(args) })
}

// Conv checks the convolution against Conv's contract and its operands
// against their buffers, and captures one cuDNN call (the product's, or
// cudnnConvolutionBiasActivationForward for a forward with an epilogue,
// with the algorithm and workspace chosen before the capture: Record's
// first pass, or at once in a blocking sequence).
func (en *encoder) Conv(c gpuhost.Conv) error {
	op := fmt.Sprintf("op %d (%v convolution)", en.ops, c.Product)
	if en.d.recording != en.seq {
		return fmt.Errorf("cuda: %s: the encoder of sequence %q is used outside its Record", op, en.seq)
	}
	args, used, err := en.d.convArgs(op, c)
	if err != nil {
		return err
	}
	if en.blocking {
		if err := en.d.e.PrepareConv(args); err != nil {
			return fmt.Errorf("cuda: %s: %w", op, err)
		}
	}
	for _, b := range used {
		en.use(b)
	}
	e := en.d.e
	return en.add(op, func() error { return e.Conv(args) })
}

// convSupport is what cuDNN's convolutions read here (gpuhost.Conv.Check):
// bfloat16 and channels-last tensors, and a forward's epilogue
// (cudnnConvolutionBiasActivationForward).
var convSupport = gpuhost.ConvSupport{BF16: true, NHWC: true, Epilogue: true}

// convArgs checks c (its geometry, product, precision, element types,
// layout and epilogue, and each tensor's bytes inside its buffer, the
// same in NCHW and NHWC; an epilogue's Bias of OC elements and Z of Y's)
// and returns its ConvArgs and the buffers it uses.
func (d *Device) convArgs(op string, c gpuhost.Conv) (ConvArgs, []*buffer, error) {
	if err := c.Check(convSupport); err != nil {
		return ConvArgs{}, nil, fmt.Errorf("cuda: %s: %w", op, err)
	}
	if m, ok := convMath[c.Precision]; !ok || m.elem != c.X.Elem {
		return ConvArgs{}, nil, fmt.Errorf("cuda: %s: precision %v on %v tensors, which cuDNN does not compute here (f32 or tf32 on float32 tensors, bf16 on bfloat16 ones)", op, c.Precision, c.X.Elem)
	}
	xs, ws, ys := c.Geom.Sizes()
	es := c.X.Elem.Size() // 4 or 2, the same for all three: Check refused the rest
	var ptrs [5]DevicePtr
	var used []*buffer
	for i, t := range []struct {
		name string
		x    gpuhost.Tensor
		n    int
	}{{"X", c.X, xs}, {"W", c.W, ws}, {"Y", c.Y, ys}, {"Bias", c.Bias, c.Geom.OC}, {"Z", c.Z, ys}} {
		if i >= 3 && t.x.Buf == nil {
			continue // no epilogue, or one without Z
		}
		b, err := d.buffer(t.x.Buf, op+", tensor "+t.name)
		if err != nil {
			return ConvArgs{}, nil, err
		}
		if t.x.Offset < 0 || t.x.Offset%es != 0 || t.x.Offset+es*t.n > b.n {
			return ConvArgs{}, nil, fmt.Errorf("cuda: %s, tensor %s: %d %vs at offset %d need bytes up to %d of buffer %q, which has %d (offsets are multiples of %d)",
				op, t.name, t.n, t.x.Elem, t.x.Offset, t.x.Offset+es*t.n, b.label, b.n, es)
		}
		ptrs[i] = b.ptr + DevicePtr(t.x.Offset)
		used = append(used, b)
	}
	return ConvArgs{Geom: c.Geom, Product: c.Product, X: ptrs[0], W: ptrs[1], Y: ptrs[2], Alpha: c.Alpha, Beta: c.Beta, Precision: c.Precision, NHWC: c.NHWC,
		Bias: ptrs[3], Z: ptrs[4], Act: c.Act}, used, nil
}

// preparer is Record's first pass over a sequence's ops: it checks each
// Conv and prepares cuDNN for it (Engine.PrepareConv) before the
// capture; kernels and GEMMs wait for the second pass.
type preparer struct{ d *Device }

func (p *preparer) Dispatch(string, []gpuhost.Arg, int, int) error { return nil }
func (p *preparer) Gemm(gpuhost.Gemm) error                        { return nil }
func (p *preparer) Conv(c gpuhost.Conv) error {
	op := fmt.Sprintf("a %v convolution", c.Product)
	args, _, err := p.d.convArgs(op, c)
	if err != nil {
		return err
	}
	if err := p.d.e.PrepareConv(args); err != nil {
		return fmt.Errorf("cuda: %s (%v): %w", op, c.Geom, err)
	}
	return nil
}

var (
	_ gpuhost.Device = (*Device)(nil)
	_ gpuhost.Caller = (*Device)(nil)
	_ gpuhost.Pinner = (*Device)(nil)
)
