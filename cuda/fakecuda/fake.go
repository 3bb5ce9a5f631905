// Package fakecuda is a simulated NVIDIA GPU behind the function tables of
// package cuda, so the Engine and Device code that drives a real GPU runs in
// tests on any Linux machine. It computes for real: NVRTC's compile builds
// the CUDA C++ source with g++ through a shim into a shared library that
// cuLaunchKernel calls, and cublasSgemm multiplies in Go on the simulated
// device memory (real memory mapped for each allocation). cublasGemmEx
// takes float32 matrices (CUDA_R_32F), or bfloat16 A and B (CUDA_R_16BF)
// with a float32 C and CUBLAS_COMPUTE_32F, else
// CUBLAS_STATUS_NOT_SUPPORTED; the compute types CUBLAS_COMPUTE_32F,
// _32F_FAST_16BF and _32F_FAST_TF32 (else CUBLAS_STATUS_INVALID_VALUE)
// and the algorithm CUBLAS_GEMM_DEFAULT, and computes the fast types as a
// tensor core does: each element of A and B rounded to bfloat16 or TF32
// (to nearest, ties to even), products summed in float32; bfloat16
// operands are decoded from their bits and multiplied alike.
//
// It enforces the rules a real GPU enforces, with the status codes a real
// driver returns: a context must be current on the calling OS thread
// (CUDA_ERROR_INVALID_CONTEXT otherwise); while a stream is captured, the
// capturing thread may not allocate, copy synchronously or wait
// (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, and the capture is invalidated);
// every pointer a kernel or GEMM receives must lie inside a live
// allocation, checked when the work runs, and a fault is reported at the
// next synchronisation and then sticks (CUDA_ERROR_ILLEGAL_ADDRESS); an
// image must be for the device's architecture. Work recorded in a graph
// runs when the graph is launched, with the buffers' values at that time.
// Counters (Stats) let tests assert how many launches, graph launches,
// synchronisations and allocations the host code made. NCCL is simulated
// too, over several fake GPUs of one process (NCCLWorld, nccl.go, with
// the rules it enforces): a collective pending on a stream makes
// cuStreamQuery answer CUDA_ERROR_NOT_READY, and work launched after it on
// that stream waits for it. Events order streams as on a GPU: a stream
// that waits for an event (cuStreamWaitEvent) waits for the NCCL work
// pending on the recorded stream at cuEventRecord, and a stream that does
// not wait runs beside it (kernels run at launch, so only NCCL work is
// ever pending); an event on a capturing stream is not simulated
// (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, the capture invalidated). An
// event made without CU_EVENT_DISABLE_TIMING takes the monotonic clock
// when its stream reaches it: at cuEventRecord, since the kernels before
// it have run, or when the NCCL work pending then finishes.
// cuEventElapsedTime answers the difference in milliseconds, and
// CUDA_ERROR_INVALID_HANDLE for an event never recorded or made with
// CU_EVENT_DISABLE_TIMING, CUDA_ERROR_NOT_READY for one recorded but not
// reached; cuEventSynchronize waits for the point and reports a pending
// fault, as cuStreamSynchronize does.
//
// cuDNN's legacy convolution API is simulated too (dnn.go, whose doc lists
// the rules it enforces with cuDNN's status codes): the three products of
// a convolution in Go loops, in the precision its math type sets, counted
// in Stats (Convs, ConvRuns); Options.NoDNN simulates a machine without
// cuDNN.
package fakecuda

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/mlbuild/mlbuild/cuda"
)

// Options describe the simulated machine.
type Options struct {
	// Name is the GPU's name; "" is "fakecuda simulated GPU".
	Name string
	// CCMajor, CCMinor is its compute capability; 0.0 is 9.0.
	CCMajor, CCMinor int
	// Memory is its memory in bytes; 0 is 1 GiB.
	Memory uint64
	// Devices is how many GPUs the driver sees; 0 is 1, -1 is none (cuInit
	// then fails with CUDA_ERROR_NO_DEVICE, as a machine without a GPU).
	Devices int
	// DriverVersion is cuDriverGetVersion's answer; 0 is 13000 (13.0).
	DriverVersion int32
	// NVRTCMajor, NVRTCMinor is NVRTC's version; 0.0 is 13.0.
	NVRTCMajor, NVRTCMinor int32
	// Archs are the sm numbers NVRTC compiles for; nil is 75 to 120.
	Archs []int32
	// NoDNN simulates a machine without cuDNN: loading it fails with
	// cuda's missing-library error.
	NoDNN bool
	// WorkDir keeps the kernels built by g++; "" is a folder in the
	// system's temporary folder shared by every fake.
	WorkDir string
	// ConvAlgoDelay makes each run of a cuDNN call with one of its
	// algorithms take that much longer (the fake sleeps before it
	// computes, when the call runs: at once, or at a graph's launch):
	// how a test makes one algorithm the faster, which cuda's timed
	// choice must then find.
	ConvAlgoDelay map[int32]time.Duration
}

// Stats counts what the host code did.
type Stats struct {
	Inits         int // cuInit
	Allocs, Frees int // cuMemAlloc, cuMemFree
	Copies        int // host↔device copies, synchronous or not
	BytesOut      int // bytes copied from the device to the host
	Launches      int // kernel launches run directly (not captured)
	KernelRuns    int // kernels run, directly or by a graph
	Gemms         int // cublasSgemm calls run directly (not captured)
	GemmRuns      int // GEMMs run, directly or by a graph
	Captures      int // stream captures ended into a graph
	GraphLaunches int // cuGraphLaunch
	Syncs         int // cuStreamSynchronize
	EventSyncs    int // cuEventSynchronize
	Compiles      int // nvrtcCompileProgram
	ModuleLoads   int // cuModuleLoadData
	Pins          int // cuMemHostRegister
	Convs         int // cuDNN convolution products run directly (not captured)
	ConvRuns      int // cuDNN convolution products run, directly or by a graph
}

// Fake is the simulated GPU, its driver, NVRTC and cuBLAS. It is safe for
// use from several goroutines; the CUDA rules it checks are per OS thread.
type Fake struct {
	mu   sync.Mutex
	opts Options

	current  map[int]cuda.Context // OS thread → current context
	ctxRefs  int
	next     uintptr
	allocs   map[uint64]*allocation
	pinned   map[uint64]uint64 // page-locked host ranges: base → bytes
	streams  map[cuda.Stream]*stream
	modules  map[cuda.Module]*module
	funcs    map[cuda.Function]*function
	graphs   map[uintptr]*graph // captured graphs and instantiated ones
	programs map[cuda.Program]*program
	handles  map[cuda.BLASHandle]*blasHandle
	cstrings map[string][]byte
	events   map[cuda.Event]*event
	// the fake cuDNN's handles and descriptors (dnn.go)
	dnnHandles map[cuda.DNNHandle]*dnnHandle
	descs      map[uintptr]*dnnTensor
	descKinds  map[uintptr]string
	convAlgos  map[int32]int

	pending cuda.Result // a fault to report at the next synchronisation
	sticky  cuda.Result // a fault reported: every call fails with it
	fail    []cuda.Result
	// failKernel: the next run of this kernel ("*": of any) faults with
	// failKernelCode.
	failKernel     string
	failKernelCode cuda.Result
	// refuseAlgo: RefuseConvAlgo's refusals, by algorithm.
	refuseAlgo map[int32]*refusal
	stats      Stats
	faults     []string
	// nccl is the fake NCCL world of this GPU's communicators, once NCCL
	// asked for it (nccl.go).
	nccl *NCCLWorld
}

type allocation struct {
	base uint64
	mem  []byte // mapped; len is the size asked for
}

type stream struct {
	capturing   bool
	mode        int32
	thread      int
	invalidated string
	ops         []op
	// async is the fake NCCL's work enqueued on the stream, each closed
	// when its collective finishes (or is aborted); later work on the
	// stream waits for it, as a GPU runs a stream in order.
	async []chan struct{}
}

// op is one piece of captured work.
type op struct {
	kernel *function
	args   []uint64
	groups uint32
	block  uint32
	gemm   *gemmCall
	conv   *convCall
}

// event is a point recorded in a stream: the NCCL work pending on it
// then (its kernels have run: the fake runs them at launch). A stream
// that waits for the event gets that work as its own pending work, so its
// later work waits for it, and nothing else. An event created without
// EventDisableTiming (timing) also takes the time when its stream
// reaches the point: at once when nothing was pending, else when the last
// of that work finishes.
type event struct {
	timing bool
	after  []chan struct{}
	// reach is the point last recorded, nil before the first record.
	reach *reach
}

// reach is one recording of an event: reached is closed when the stream
// gets there, and at (the monotonic clock then) is set before.
type reach struct {
	reached chan struct{}
	at      time.Time
}

// record makes a new point of e after the work in after, reached at once
// when none of it is pending, else by a goroutine when the last finishes
// (NCCL work always finishes or is aborted, which closes its channel).
func (e *event) record(after []chan struct{}) {
	r := &reach{reached: make(chan struct{})}
	e.after, e.reach = after, r
	if len(after) == 0 {
		r.at = time.Now()
		close(r.reached)
		return
	}
	go func() {
		for _, c := range after {
			<-c
		}
		r.at = time.Now()
		close(r.reached)
	}()
}

// done reports whether the stream has reached r.
func (r *reach) done() bool {
	select {
	case <-r.reached:
		return true
	default:
		return false
	}
}

type graph struct {
	ops  []op
	exec bool
}

type module struct {
	lib   *loaded
	funcs []cuda.Function
}

type function struct {
	mod    cuda.Module
	name   string
	launch uintptr
	nargs  int
}

type program struct {
	src     string
	log     string
	arch    string
	kernels []kernelSig
}

type blasHandle struct {
	stream    cuda.Stream
	math      int32
	workspace uint64
}

// New makes a fake GPU.
func New(opts Options) *Fake {
	if opts.Name == "" {
		opts.Name = "fakecuda simulated GPU"
	}
	if opts.CCMajor == 0 {
		opts.CCMajor, opts.CCMinor = 9, 0
	}
	if opts.Memory == 0 {
		opts.Memory = 1 << 30
	}
	if opts.Devices == 0 {
		opts.Devices = 1
	}
	if opts.DriverVersion == 0 {
		opts.DriverVersion = 13000
	}
	if opts.NVRTCMajor == 0 {
		opts.NVRTCMajor, opts.NVRTCMinor = 13, 0
	}
	if opts.Archs == nil {
		opts.Archs = []int32{75, 80, 86, 87, 89, 90, 100, 103, 110, 120}
	}
	if opts.WorkDir == "" {
		opts.WorkDir = filepath.Join(os.TempDir(), fmt.Sprintf("mlbuild-fakecuda-%d", os.Getuid()))
	}
	return &Fake{
		opts: opts, current: map[int]cuda.Context{}, next: 0x100,
		allocs: map[uint64]*allocation{}, pinned: map[uint64]uint64{}, streams: map[cuda.Stream]*stream{},
		modules: map[cuda.Module]*module{}, funcs: map[cuda.Function]*function{},
		graphs: map[uintptr]*graph{}, programs: map[cuda.Program]*program{},
		handles: map[cuda.BLASHandle]*blasHandle{}, cstrings: map[string][]byte{},
		events:     map[cuda.Event]*event{},
		dnnHandles: map[cuda.DNNHandle]*dnnHandle{}, descs: map[uintptr]*dnnTensor{}, descKinds: map[uintptr]string{},
		convAlgos: map[int32]int{},
	}
}

// Stats returns the counters.
func (f *Fake) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

// MathMode is the math mode last set on any cuBLAS handle (-1 if none).
func (f *Fake) MathMode() int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, h := range f.handles {
		return h.math
	}
	return -1
}

// Faults lists the faults the simulated GPU hit, in order, each naming the
// work and the address.
func (f *Fake) Faults() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.faults)
}

// FailNextGraphLaunch makes the next graph launch fail on the simulated GPU
// with code, as a kernel fault would: the launch itself succeeds, the
// failure shows at the next synchronisation and then sticks.
func (f *Fake) FailNextGraphLaunch(code cuda.Result) { f.FailGraphLaunch(1, code) }

// FailGraphLaunch makes the nth graph launch from now (1: the next) fail
// as FailNextGraphLaunch does; the launches before it run normally.
func (f *Fake) FailGraphLaunch(n int, code cuda.Result) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.fail) < n-1 {
		f.fail = append(f.fail, cuda.Success)
	}
	if len(f.fail) >= n {
		f.fail[n-1] = code
		return
	}
	f.fail = append(f.fail, code)
}

// refusal is RefuseConvAlgo's for one algorithm: the calls to let
// through first, and the status of the rest.
type refusal struct {
	pass   int
	status cuda.DNNStatus
}

// RefuseConvAlgo makes the cuDNN calls with algorithm algo (a product or
// a fused forward, direct or captured) return status s, after the first
// pass of them from now have been made as usual: as cuDNN refuses an
// algorithm its heuristics proposed, or refuses it only at a later call.
// A status of 0 ends the refusal.
func (f *Fake) RefuseConvAlgo(algo int32, s cuda.DNNStatus, pass int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s == 0 {
		delete(f.refuseAlgo, algo)
		return
	}
	if f.refuseAlgo == nil {
		f.refuseAlgo = map[int32]*refusal{}
	}
	f.refuseAlgo[algo] = &refusal{pass: pass, status: s}
}

// FailKernel makes the next run of the kernel named name ("*": of any
// kernel), launched directly or by a graph, fault with code on the
// simulated GPU: the launch succeeds, the fault shows at the next
// synchronisation and then sticks, naming the kernel in Faults.
func (f *Fake) FailKernel(name string, code cuda.Result) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failKernel, f.failKernelCode = name, code
}

// Leaks lists what is still allocated or created, NCCL communicators
// included, for a check after the host code has closed everything.
func (f *Fake) Leaks() []string {
	out := f.leaks()
	f.mu.Lock()
	w := f.nccl
	f.mu.Unlock()
	if w != nil {
		out = append(out, w.ncclLeaks(f)...)
	}
	return out
}

func (f *Fake) leaks() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, a := range f.allocs {
		out = append(out, fmt.Sprintf("allocation %#x of %d bytes", a.base, len(a.mem)))
	}
	for s := range f.streams {
		out = append(out, fmt.Sprintf("stream %#x", s))
	}
	for m := range f.modules {
		out = append(out, fmt.Sprintf("module %#x", m))
	}
	for g, x := range f.graphs {
		out = append(out, fmt.Sprintf("graph %#x (instantiated %v)", g, x.exec))
	}
	for h := range f.handles {
		out = append(out, fmt.Sprintf("cuBLAS handle %#x", h))
	}
	for e := range f.events {
		out = append(out, fmt.Sprintf("event %#x", e))
	}
	for h := range f.dnnHandles {
		out = append(out, fmt.Sprintf("cuDNN handle %#x", h))
	}
	for d, k := range f.descKinds {
		out = append(out, fmt.Sprintf("cuDNN %s descriptor %#x", k, d))
	}
	if f.ctxRefs > 0 {
		out = append(out, fmt.Sprintf("primary context with %d references", f.ctxRefs))
	}
	sort.Strings(out)
	return out
}

// Libraries returns the function tables of the fake, for cuda.Options.
func (f *Fake) Libraries() *cuda.Libraries {
	files := []cuda.LibraryFile{
		{Library: "CUDA driver", Path: "fakecuda", Version: fmt.Sprintf("%d.%d", f.opts.DriverVersion/1000, f.opts.DriverVersion%1000/10)},
		{Library: "NVRTC", Path: "fakecuda (g++)", Version: fmt.Sprintf("%d.%d", f.opts.NVRTCMajor, f.opts.NVRTCMinor)},
		{Library: "cuBLAS", Path: "fakecuda (Go)"},
	}
	l := &cuda.Libraries{Driver: f.driver(), NVRTC: f.nvrtc(), BLAS: f.blas(), Files: files}
	l.DNNLoad = func() (*cuda.DNNAPI, cuda.LibraryFile, error) {
		if f.opts.NoDNN {
			return nil, cuda.LibraryFile{}, cuda.MissingDNNError("libcudnn.so.9: fakecuda simulates a machine without cuDNN")
		}
		return f.dnn(), cuda.LibraryFile{Library: "cuDNN", Path: "fakecuda (Go)", Version: "9.10.0"}, nil
	}
	return l
}

// handle returns a new handle value.
func (f *Fake) handle() uintptr {
	f.next += 0x10
	return f.next
}

// enter locks the fake for one call and checks the sticky fault and, with
// needCtx, that a context is current on the calling thread. A non-zero
// result is the call's answer; the caller must unlock either way.
func (f *Fake) enter(needCtx bool) cuda.Result {
	f.mu.Lock()
	if f.sticky != cuda.Success {
		return f.sticky
	}
	if needCtx && f.current[threadID()] == 0 {
		return cuda.ErrorInvalidContext
	}
	return cuda.Success
}

// unsafeCall reports whether the calling thread may not make a
// synchronous call now (a capture forbids it), and invalidates that
// capture as CUDA does.
func (f *Fake) unsafeCall(what string) cuda.Result {
	tid := threadID()
	for _, s := range f.streams {
		if s.capturing && (s.mode == cuda.CaptureModeGlobal || s.mode == cuda.CaptureModeThreadLocal && s.thread == tid) {
			if s.invalidated == "" {
				s.invalidated = what + " during stream capture"
			}
			return cuda.ErrorStreamCaptureUnsup
		}
	}
	return cuda.Success
}

// synchronise delivers a pending fault (and makes it stick).
func (f *Fake) synchronise() cuda.Result {
	if f.pending != cuda.Success {
		f.sticky, f.pending = f.pending, cuda.Success
		return f.sticky
	}
	return cuda.Success
}

// fault records a fault of running work; the first is reported later.
func (f *Fake) fault(code cuda.Result, format string, args ...any) {
	f.faults = append(f.faults, fmt.Sprintf(format, args...))
	if f.pending == cuda.Success {
		f.pending = code
	}
}

// find returns the allocation holding bytes [p, p+n), or nil.
func (f *Fake) find(p, n uint64) *allocation {
	for _, a := range f.allocs {
		if p >= a.base && p+n <= a.base+uint64(len(a.mem)) && p+n >= p {
			return a
		}
	}
	return nil
}

// bytesAt is the device memory [p, p+n), or nil when it is not inside one
// allocation.
func (f *Fake) bytesAt(p, n uint64) []byte {
	a := f.find(p, n)
	if a == nil {
		return nil
	}
	return a.mem[p-a.base : p-a.base+n]
}

// cstring returns a NUL-terminated copy of s that lives as long as the fake.
func (f *Fake) cstring(s string) *byte {
	b, ok := f.cstrings[s]
	if !ok {
		b = append([]byte(s), 0)
		f.cstrings[s] = b
	}
	return &b[0]
}

// goString reads a NUL-terminated C string.
func goString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// errorNames are the driver statuses the fake returns, with CUDA's names
// and messages.
var errorNames = map[cuda.Result][2]string{
	0:   {"CUDA_SUCCESS", "no error"},
	1:   {"CUDA_ERROR_INVALID_VALUE", "invalid argument"},
	2:   {"CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
	3:   {"CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
	100: {"CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
	101: {"CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
	200: {"CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
	201: {"CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
	209: {"CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device"},
	222: {"CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "the provided PTX was compiled with an unsupported toolchain"},
	400: {"CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
	401: {"CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state"},
	500: {"CUDA_ERROR_NOT_FOUND", "named symbol not found"},
	700: {"CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
	712: {"CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", "part or all of the requested memory range is already mapped"},
	713: {"CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", "pointer does not correspond to a registered memory region"},
	716: {"CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned address"},
	719: {"CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
	900: {"CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing"},
	901: {"CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "operation failed due to a previous error during capture"},
	906: {"CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", "attempt to terminate a thread-local capture sequence from another thread"},
}

func (f *Fake) driver() *cuda.DriverAPI {
	return &cuda.DriverAPI{
		Init: func(flags uint32) cuda.Result {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.stats.Inits++
			if flags != 0 {
				return cuda.ErrorInvalidValue
			}
			if f.opts.Devices < 0 {
				return cuda.ErrorNoDevice
			}
			return cuda.Success
		},
		DriverGetVersion: func(v *int32) cuda.Result { *v = f.opts.DriverVersion; return cuda.Success },
		GetErrorName: func(r cuda.Result, name **byte) cuda.Result {
			f.mu.Lock()
			defer f.mu.Unlock()
			n, ok := errorNames[r]
			if !ok {
				return cuda.ErrorInvalidValue
			}
			*name = f.cstring(n[0])
			return cuda.Success
		},
		GetErrorString: func(r cuda.Result, msg **byte) cuda.Result {
			f.mu.Lock()
			defer f.mu.Unlock()
			n, ok := errorNames[r]
			if !ok {
				return cuda.ErrorInvalidValue
			}
			*msg = f.cstring(n[1])
			return cuda.Success
		},
		DeviceGetCount: func(n *int32) cuda.Result { *n = int32(max(f.opts.Devices, 0)); return cuda.Success },
		DeviceGet: func(dev *cuda.DeviceHandle, ordinal int32) cuda.Result {
			if ordinal < 0 || int(ordinal) >= f.opts.Devices {
				return cuda.ErrorInvalidDevice
			}
			*dev = cuda.DeviceHandle(ordinal)
			return cuda.Success
		},
		DeviceGetName: func(name *byte, n int32, dev cuda.DeviceHandle) cuda.Result {
			if n <= 0 || name == nil {
				return cuda.ErrorInvalidValue
			}
			dst := unsafe.Slice(name, n)
			s := f.opts.Name
			if len(s) >= int(n) {
				s = s[:n-1]
			}
			copy(dst, s)
			dst[len(s)] = 0
			return cuda.Success
		},
		// Every two fake GPUs can reach each other without native
		// atomics, as over PCIe.
		DeviceCanAccessPeer: func(can *int32, dev, peer cuda.DeviceHandle) cuda.Result {
			if int(dev) >= f.opts.Devices || int(peer) >= f.opts.Devices || dev < 0 || peer < 0 {
				return cuda.ErrorInvalidDevice
			}
			*can = 0
			if dev != peer {
				*can = 1
			}
			return cuda.Success
		},
		DeviceGetP2PAttribute: func(v *int32, attr int32, src, dst cuda.DeviceHandle) cuda.Result {
			if int(src) >= f.opts.Devices || int(dst) >= f.opts.Devices || src < 0 || dst < 0 || src == dst {
				return cuda.ErrorInvalidDevice
			}
			switch attr {
			case cuda.P2PPerformanceRank, cuda.P2PNativeAtomicSupported:
				*v = 0
			case cuda.P2PAccessSupported:
				*v = 1
			default:
				return cuda.ErrorInvalidValue
			}
			return cuda.Success
		},
		DeviceGetAttribute: func(v *int32, attr int32, dev cuda.DeviceHandle) cuda.Result {
			switch attr {
			case cuda.AttrComputeCapabilityMajor:
				*v = int32(f.opts.CCMajor)
			case cuda.AttrComputeCapabilityMinor:
				*v = int32(f.opts.CCMinor)
			default:
				return cuda.ErrorInvalidValue
			}
			return cuda.Success
		},
		DeviceTotalMem: func(n *uintptr, dev cuda.DeviceHandle) cuda.Result { *n = uintptr(f.opts.Memory); return cuda.Success },
		DevicePrimaryCtxRetain: func(ctx *cuda.Context, dev cuda.DeviceHandle) cuda.Result {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.ctxRefs++
			*ctx = cuda.Context(0xC0 + uintptr(dev))
			return cuda.Success
		},
		DevicePrimaryCtxRelease: func(dev cuda.DeviceHandle) cuda.Result {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.ctxRefs == 0 {
				return cuda.ErrorInvalidContext
			}
			f.ctxRefs--
			if f.ctxRefs == 0 {
				// The context is destroyed: it no longer is current anywhere.
				clear(f.current)
				f.sticky, f.pending = cuda.Success, cuda.Success
			}
			return cuda.Success
		},
		CtxSetCurrent: func(ctx cuda.Context) cuda.Result {
			f.mu.Lock()
			defer f.mu.Unlock()
			if ctx != 0 && f.ctxRefs == 0 {
				return cuda.ErrorInvalidContext
			}
			f.current[threadID()] = ctx
			return cuda.Success
		},
		MemGetInfo: func(free, total *uintptr) cuda.Result {
			defer f.mu.Unlock()
			if r := f.enter(true); r != 0 {
				return r
			}
			*free, *total = uintptr(f.opts.Memory-f.used()), uintptr(f.opts.Memory)
			return cuda.Success
		},
		MemAlloc:          f.memAlloc,
		MemFree:           f.memFree,
		MemsetD8:          f.memsetD8,
		MemHostRegister:   f.hostRegister,
		MemHostUnregister: f.hostUnregister,
		MemcpyHtoD: func(dst cuda.DevicePtr, src unsafe.Pointer, n uintptr) cuda.Result {
			return f.copyIn(dst, src, n, 0, false)
		},
		MemcpyDtoH: func(dst unsafe.Pointer, src cuda.DevicePtr, n uintptr) cuda.Result {
			return f.copyOut(dst, src, n, 0, false)
		},
		MemcpyHtoDAsync: func(dst cuda.DevicePtr, src unsafe.Pointer, n uintptr, s cuda.Stream) cuda.Result {
			return f.copyIn(dst, src, n, s, true)
		},
		MemcpyDtoHAsync: func(dst unsafe.Pointer, src cuda.DevicePtr, n uintptr, s cuda.Stream) cuda.Result {
			return f.copyOut(dst, src, n, s, true)
		},
		ModuleLoadData:    f.moduleLoadData,
		ModuleUnload:      f.moduleUnload,
		ModuleGetFunction: f.moduleGetFunction,
		LaunchKernel:      f.launchKernel,
		StreamCreate: func(s *cuda.Stream, flags uint32) cuda.Result {
			defer f.mu.Unlock()
			if r := f.enter(true); r != 0 {
				return r
			}
			*s = cuda.Stream(f.handle())
			f.streams[*s] = &stream{}
			return cuda.Success
		},
		StreamDestroy: func(s cuda.Stream) cuda.Result {
			defer f.mu.Unlock()
			if r := f.enter(true); r != 0 {
				return r
			}
			if f.streams[s] == nil {
				return 400
			}
			delete(f.streams, s)
			return cuda.Success
		},
		StreamSynchronize:  f.streamSynchronize,
		StreamQuery:        f.streamQuery,
		StreamBeginCapture: f.beginCapture,
		StreamEndCapture:   f.endCapture,
		GraphInstantiate: func(exec *cuda.GraphExec, g cuda.Graph, flags uint64) cuda.Result {
			defer f.mu.Unlock()
			if r := f.enter(true); r != 0 {
				return r
			}
			src := f.graphs[uintptr(g)]
			if src == nil || src.exec || flags != 0 {
				return cuda.ErrorInvalidValue
			}
			h := f.handle()
			f.graphs[h] = &graph{ops: slices.Clone(src.ops), exec: true}
			*exec = cuda.GraphExec(h)
			return cuda.Success
		},
		GraphLaunch: f.graphLaunch,
		GraphExecDestroy: func(exec cuda.GraphExec) cuda.Result {
			return f.destroyGraph(uintptr(exec), true)
		},
		GraphDestroy: func(g cuda.Graph) cuda.Result { return f.destroyGraph(uintptr(g), false) },
		EventCreate: func(ev *cuda.Event, flags uint32) cuda.Result {
			defer f.mu.Unlock()
			if r := f.enter(true); r != 0 {
				return r
			}
			if ev == nil || flags&^cuda.EventDisableTiming != 0 {
				return cuda.ErrorInvalidValue
			}
			*ev = cuda.Event(f.handle())
			f.events[*ev] = &event{timing: flags&cuda.EventDisableTiming == 0}
			return cuda.Success
		},
		EventRecord: func(ev cuda.Event, s cuda.Stream) cuda.Result {
			defer f.mu.Unlock()
			if r := f.enter(true); r != 0 {
				return r
			}
			e, st := f.events[ev], f.streams[s]
			if e == nil || st == nil {
				return 400
			}
			if st.capturing {
				st.invalidated = "cuEventRecord on a capturing stream (not simulated)"
				return cuda.ErrorStreamCaptureUnsup
			}
			e.record(slices.Clone(f.pendingAsync(st)))
			return cuda.Success
		},
		StreamWaitEvent: func(s cuda.Stream, ev cuda.Event, flags uint32) cuda.Result {
			defer f.mu.Unlock()
			if r := f.enter(true); r != 0 {
				return r
			}
			e, st := f.events[ev], f.streams[s]
			if e == nil || st == nil || flags != 0 {
				return 400
			}
			if st.capturing {
				st.invalidated = "cuStreamWaitEvent on a capturing stream (not simulated)"
				return cuda.ErrorStreamCaptureUnsup
			}
			st.async = append(st.async, e.after...)
			return cuda.Success
		},
		EventDestroy: func(ev cuda.Event) cuda.Result {
			defer f.mu.Unlock()
			if r := f.enter(true); r != 0 {
				return r
			}
			if f.events[ev] == nil {
				return 400
			}
			delete(f.events, ev)
			return cuda.Success
		},
		EventSynchronize: f.eventSynchronize,
		EventElapsedTime: f.eventElapsedTime,
	}
}

// eventSynchronize waits, unlocked, until the stream reaches the point
// ev last recorded (at once when it was never recorded), then reports a
// pending fault as cuStreamSynchronize does. The event cannot be of a
// capture: recording one there is not simulated.
func (f *Fake) eventSynchronize(ev cuda.Event) cuda.Result {
	defer f.mu.Unlock()
	if r := f.enter(true); r != 0 {
		return r
	}
	e := f.events[ev]
	if e == nil {
		return cuda.ErrorInvalidHandle
	}
	f.stats.EventSyncs++
	if r := e.reach; r != nil && !r.done() {
		f.mu.Unlock()
		<-r.reached
		f.mu.Lock()
	}
	return f.synchronise()
}

// eventElapsedTime is the time in milliseconds between the points start
// and end reached, with the driver's status codes: an unknown event, one
// never recorded or one made with EventDisableTiming is
// CUDA_ERROR_INVALID_HANDLE; one recorded but not reached yet,
// CUDA_ERROR_NOT_READY.
func (f *Fake) eventElapsedTime(ms *float32, start, end cuda.Event) cuda.Result {
	defer f.mu.Unlock()
	if r := f.enter(true); r != 0 {
		return r
	}
	if ms == nil {
		return cuda.ErrorInvalidValue
	}
	a, b := f.events[start], f.events[end]
	if a == nil || b == nil || !a.timing || !b.timing || a.reach == nil || b.reach == nil {
		return cuda.ErrorInvalidHandle
	}
	if !a.reach.done() || !b.reach.done() {
		return cuda.ErrorNotReady
	}
	*ms = float32(b.reach.at.Sub(a.reach.at).Seconds() * 1e3)
	return cuda.Success
}

func (f *Fake) used() uint64 {
	var n uint64
	for _, a := range f.allocs {
		n += uint64(len(a.mem))
	}
	return n
}

func (f *Fake) memAlloc(p *cuda.DevicePtr, n uintptr) cuda.Result {
	defer f.mu.Unlock()
	if r := f.enter(true); r != 0 {
		return r
	}
	if r := f.unsafeCall("cuMemAlloc"); r != 0 {
		return r
	}
	if n == 0 {
		return cuda.ErrorInvalidValue
	}
	if uint64(n) > f.opts.Memory-f.used() {
		return cuda.ErrorOutOfMemory
	}
	mem, err := syscall.Mmap(-1, 0, int(n), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return cuda.ErrorOutOfMemory
	}
	// Real allocations are not zeroed: make that visible to the host code.
	for i := range mem {
		mem[i] = 0xA5
	}
	base := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(mem))))
	f.allocs[base] = &allocation{base: base, mem: mem}
	f.stats.Allocs++
	*p = cuda.DevicePtr(base)
	return cuda.Success
}

func (f *Fake) memFree(p cuda.DevicePtr) cuda.Result {
	defer f.mu.Unlock()
	if r := f.enter(true); r != 0 {
		return r
	}
	if r := f.unsafeCall("cuMemFree"); r != 0 {
		return r
	}
	a := f.allocs[uint64(p)]
	if a == nil {
		return cuda.ErrorInvalidValue
	}
	delete(f.allocs, uint64(p))
	syscall.Munmap(a.mem)
	f.stats.Frees++
	return cuda.Success
}

// hostRegister page-locks host memory: the fake records the range (a real
// driver refuses a range that overlaps one already registered) and counts it.
func (f *Fake) hostRegister(p unsafe.Pointer, n uintptr, flags uint32) cuda.Result {
	defer f.mu.Unlock()
	if r := f.enter(true); r != 0 {
		return r
	}
	if r := f.unsafeCall("cuMemHostRegister"); r != 0 {
		return r
	}
	base := uint64(uintptr(p))
	if p == nil || n == 0 || flags != 0 {
		return cuda.ErrorInvalidValue
	}
	for b, m := range f.pinned {
		if base < b+m && b < base+uint64(n) {
			return cuda.ErrorHostMemoryAlreadyRegistered
		}
	}
	f.pinned[base] = uint64(n)
	f.stats.Pins++
	return cuda.Success
}

func (f *Fake) hostUnregister(p unsafe.Pointer) cuda.Result {
	defer f.mu.Unlock()
	if r := f.enter(true); r != 0 {
		return r
	}
	if r := f.unsafeCall("cuMemHostUnregister"); r != 0 {
		return r
	}
	if _, ok := f.pinned[uint64(uintptr(p))]; !ok {
		return cuda.ErrorHostMemoryNotRegistered
	}
	delete(f.pinned, uint64(uintptr(p)))
	return cuda.Success
}

// Pinned reports how many bytes of host memory are page-locked now.
func (f *Fake) Pinned() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var n uint64
	for _, m := range f.pinned {
		n += m
	}
	return n
}

func (f *Fake) memsetD8(p cuda.DevicePtr, v uint8, n uintptr) cuda.Result {
	defer f.mu.Unlock()
	if r := f.enter(true); r != 0 {
		return r
	}
	if r := f.unsafeCall("cuMemsetD8"); r != 0 {
		return r
	}
	b := f.bytesAt(uint64(p), uint64(n))
	if b == nil {
		return cuda.ErrorInvalidValue
	}
	for i := range b {
		b[i] = v
	}
	return cuda.Success
}

// copyArgs checks a copy's stream: a synchronous copy is unsafe during a
// capture and waits for pending work; an asynchronous one on a capturing
// stream is not simulated (CUDA would capture a memcpy node).
func (f *Fake) copyCheck(s cuda.Stream, async bool, what string) cuda.Result {
	if !async {
		if r := f.unsafeCall(what); r != 0 {
			return r
		}
		f.awaitAsync(nil)
		return f.synchronise()
	}
	st := f.streams[s]
	if s != 0 && st == nil {
		return 400
	}
	if st != nil && st.capturing {
		st.invalidated = what + " on a capturing stream (not simulated)"
		return cuda.ErrorStreamCaptureUnsup
	}
	f.awaitAsync(st)
	return cuda.Success
}

func (f *Fake) copyIn(dst cuda.DevicePtr, src unsafe.Pointer, n uintptr, s cuda.Stream, async bool) cuda.Result {
	defer f.mu.Unlock()
	if r := f.enter(true); r != 0 {
		return r
	}
	if r := f.copyCheck(s, async, "cuMemcpyHtoD"); r != 0 {
		return r
	}
	b := f.bytesAt(uint64(dst), uint64(n))
	if b == nil || src == nil {
		return cuda.ErrorInvalidValue
	}
	copy(b, unsafe.Slice((*byte)(src), n))
	f.stats.Copies++
	return cuda.Success
}

func (f *Fake) copyOut(dst unsafe.Pointer, src cuda.DevicePtr, n uintptr, s cuda.Stream, async bool) cuda.Result {
	defer f.mu.Unlock()
	if r := f.enter(true); r != 0 {
		return r
	}
	if r := f.copyCheck(s, async, "cuMemcpyDtoH"); r != 0 {
		return r
	}
	b := f.bytesAt(uint64(src), uint64(n))
	if b == nil || dst == nil {
		return cuda.ErrorInvalidValue
	}
	copy(unsafe.Slice((*byte)(dst), n), b)
	f.stats.Copies++
	f.stats.BytesOut += int(n)
	return cuda.Success
}

// Images: what the fake NVRTC produces and the fake driver loads. A header
// line names the format and the architecture, then the CUDA source.
const (
	ptxMagic   = "// fakecuda PTX image v1\n"
	cubinMagic = "\x7fFAKECUBIN v1\n"
)

func (f *Fake) moduleLoadData(mod *cuda.Module, image unsafe.Pointer) cuda.Result {
	defer f.mu.Unlock()
	if r := f.enter(true); r != 0 {
		return r
	}
	if image == nil {
		return cuda.ErrorInvalidValue
	}
	text := goString((*byte)(image))
	var arch string
	switch {
	case strings.HasPrefix(text, ptxMagic):
		text = text[len(ptxMagic):]
	case strings.HasPrefix(text, cubinMagic):
		text = text[len(cubinMagic):]
	default:
		return cuda.ErrorInvalidImage
	}
	nl := strings.IndexByte(text, '\n')
	if nl < 0 {
		return cuda.ErrorInvalidImage
	}
	arch, text = text[:nl], text[nl+1:]
	sm := int32(f.opts.CCMajor*10 + f.opts.CCMinor)
	var n int32
	switch {
	case arch == fmt.Sprintf("sm_%d", sm):
	case strings.HasPrefix(arch, "sm_"):
		return cuda.ErrorNoBinaryForGPU
	case strings.HasPrefix(arch, "compute_"):
		if _, err := fmt.Sscanf(arch, "compute_%d", &n); err != nil {
			return cuda.ErrorInvalidImage
		}
		if n > sm {
			return cuda.ErrorNoBinaryForGPU
		}
	default:
		return cuda.ErrorInvalidImage
	}
	sigs, err := parseKernels(text)
	if err != nil {
		return cuda.ErrorInvalidImage
	}
	so, err := build(f.opts.WorkDir, text, sigs)
	if err != nil {
		return cuda.ErrorInvalidImage
	}
	lib, err := load(so, sigs)
	if err != nil {
		return cuda.ErrorInvalidImage
	}
	*mod = cuda.Module(f.handle())
	f.modules[*mod] = &module{lib: lib}
	f.stats.ModuleLoads++
	return cuda.Success
}

func (f *Fake) moduleUnload(mod cuda.Module) cuda.Result {
	defer f.mu.Unlock()
	if r := f.enter(true); r != 0 {
		return r
	}
	m := f.modules[mod]
	if m == nil {
		return 400
	}
	for _, fn := range m.funcs {
		delete(f.funcs, fn)
	}
	delete(f.modules, mod)
	return cuda.Success
}

func (f *Fake) moduleGetFunction(fn *cuda.Function, mod cuda.Module, name string) cuda.Result {
	defer f.mu.Unlock()
	if r := f.enter(true); r != 0 {
		return r
	}
	m := f.modules[mod]
	if m == nil {
		return 400
	}
	l, ok := m.lib.launchers[name]
	if !ok {
		return cuda.ErrorNotFound
	}
	h := cuda.Function(f.handle())
	f.funcs[h] = &function{mod: mod, name: name, launch: l, nargs: len(m.lib.sigs[name].params)}
	m.funcs = append(m.funcs, h)
	*fn = h
	return cuda.Success
}

func (f *Fake) launchKernel(fn cuda.Function, gx, gy, gz, bx, by, bz, shared uint32, s cuda.Stream, params *unsafe.Pointer, extra *unsafe.Pointer) cuda.Result {
	defer f.mu.Unlock()
	if r := f.enter(true); r != 0 {
		return r
	}
	k := f.funcs[fn]
	st := f.streams[s]
	if k == nil || (s != 0 && st == nil) {
		return 400
	}
	// The fake runs one-dimensional grids, the only kind mlbuild launches.
	if gx == 0 || bx == 0 || bx > 1024 || gy != 1 || gz != 1 || by != 1 || bz != 1 || shared != 0 || extra != nil {
		return cuda.ErrorInvalidValue
	}
	if k.nargs > 0 && params == nil {
		return cuda.ErrorInvalidValue
	}
	o := op{kernel: k, groups: gx, block: bx}
	if k.nargs > 0 {
		for _, p := range unsafe.Slice(params, k.nargs) {
			o.args = append(o.args, *(*uint64)(p))
		}
	}
	if st != nil && st.capturing {
		st.ops = append(st.ops, o)
		return cuda.Success
	}
	f.awaitAsync(st)
	f.stats.Launches++
	f.execute(o)
	return cuda.Success
}

// execute runs one op on the simulated GPU, checking its pointers first.
func (f *Fake) execute(o op) {
	if f.pending != cuda.Success {
		return // a faulted stream runs nothing more
	}
	if o.gemm != nil {
		f.runGemm(o.gemm)
		return
	}
	if o.conv != nil {
		f.runConv(o.conv)
		return
	}
	k := o.kernel
	if f.failKernel != "" && (f.failKernel == "*" || f.failKernel == k.name) {
		f.failKernel = ""
		f.fault(f.failKernelCode, "kernel %s: a fault injected by FailKernel", k.name)
		return
	}
	if f.modules[k.mod] == nil {
		f.fault(cuda.ErrorLaunchFailed, "kernel %s: its module was unloaded", k.name)
		return
	}
	for i, p := range o.args {
		if f.find(p, 1) == nil {
			f.fault(cuda.ErrorIllegalAddress, "kernel %s, argument %d: address %#x is in no live allocation", k.name, i, p)
			return
		}
		if p%4 != 0 {
			f.fault(716, "kernel %s, argument %d: address %#x is not 4-byte aligned", k.name, i, p)
			return
		}
	}
	run(k.launch, o.args, o.groups, o.block)
	f.stats.KernelRuns++
}

func (f *Fake) streamSynchronize(s cuda.Stream) cuda.Result {
	defer f.mu.Unlock()
	if r := f.enter(true); r != 0 {
		return r
	}
	st := f.streams[s]
	if s != 0 && st == nil {
		return 400
	}
	f.stats.Syncs++
	if st != nil && st.capturing {
		if st.invalidated == "" {
			st.invalidated = "cuStreamSynchronize of the capturing stream"
		}
		return cuda.ErrorStreamCaptureUnsup
	}
	f.awaitAsync(st)
	return f.synchronise()
}

func (f *Fake) beginCapture(s cuda.Stream, mode int32) cuda.Result {
	defer f.mu.Unlock()
	if r := f.enter(true); r != 0 {
		return r
	}
	st := f.streams[s]
	if st == nil {
		if s == 0 {
			return cuda.ErrorStreamCaptureUnsup // the legacy stream cannot be captured
		}
		return 400
	}
	if st.capturing {
		return 401
	}
	if mode < cuda.CaptureModeGlobal || mode > cuda.CaptureModeRelaxed {
		return cuda.ErrorInvalidValue
	}
	f.awaitAsync(st)
	*st = stream{capturing: true, mode: mode, thread: threadID()}
	return cuda.Success
}

func (f *Fake) endCapture(s cuda.Stream, g *cuda.Graph) cuda.Result {
	defer f.mu.Unlock()
	if r := f.enter(true); r != 0 {
		return r
	}
	st := f.streams[s]
	if st == nil {
		return 400
	}
	if !st.capturing {
		return 401
	}
	if st.mode == cuda.CaptureModeThreadLocal && st.thread != threadID() {
		return 906
	}
	ops, bad := st.ops, st.invalidated
	*st = stream{}
	*g = 0
	if bad != "" {
		return cuda.ErrorStreamCaptureInvalid
	}
	h := f.handle()
	f.graphs[h] = &graph{ops: ops}
	f.stats.Captures++
	*g = cuda.Graph(h)
	return cuda.Success
}

func (f *Fake) graphLaunch(exec cuda.GraphExec, s cuda.Stream) cuda.Result {
	defer f.mu.Unlock()
	if r := f.enter(true); r != 0 {
		return r
	}
	g := f.graphs[uintptr(exec)]
	st := f.streams[s]
	if g == nil || !g.exec || (s != 0 && st == nil) {
		return 400
	}
	if st != nil && st.capturing {
		return cuda.ErrorStreamCaptureUnsup // graphs in graphs are not simulated
	}
	f.awaitAsync(st)
	f.stats.GraphLaunches++
	if len(f.fail) > 0 {
		code := f.fail[0]
		f.fail = f.fail[1:]
		if code != cuda.Success {
			f.fault(code, "graph %#x: a fault injected by FailGraphLaunch", exec)
			return cuda.Success
		}
	}
	for _, o := range g.ops {
		f.execute(o)
	}
	return cuda.Success
}

func (f *Fake) destroyGraph(h uintptr, exec bool) cuda.Result {
	defer f.mu.Unlock()
	if r := f.enter(true); r != 0 {
		return r
	}
	g := f.graphs[h]
	if g == nil || g.exec != exec {
		return 400
	}
	delete(f.graphs, h)
	return cuda.Success
}

// pendingAsync returns the unfinished NCCL work of st, or of every stream
// when st is nil, dropping what has finished. f.mu is held.
func (f *Fake) pendingAsync(st *stream) []chan struct{} {
	var out []chan struct{}
	for _, x := range f.streams {
		if st != nil && x != st {
			continue
		}
		live := x.async[:0]
		for _, c := range x.async {
			select {
			case <-c:
			default:
				live = append(live, c)
			}
		}
		x.async = live
		out = append(out, live...)
	}
	return out
}

// awaitAsync waits until the NCCL work enqueued on st (every stream's,
// for nil) has finished, with the fake unlocked meanwhile: work launched
// after a collective runs after it, as on a GPU. f.mu is held on entry
// and on return. (A real launch returns at once and the GPU waits; here
// the launching thread waits, so a collective that never finishes blocks
// the launch until it is aborted.)
func (f *Fake) awaitAsync(st *stream) {
	for {
		pending := f.pendingAsync(st)
		if len(pending) == 0 {
			return
		}
		f.mu.Unlock()
		for _, c := range pending {
			<-c
		}
		f.mu.Lock()
	}
}

func (f *Fake) streamQuery(s cuda.Stream) cuda.Result {
	defer f.mu.Unlock()
	if r := f.enter(true); r != 0 {
		return r
	}
	st := f.streams[s]
	if s != 0 && st == nil {
		return 400
	}
	// A fault shows before pending work: a GPU whose context faulted
	// reports it to every query, and its collectives never finish.
	if r := f.synchronise(); r != cuda.Success {
		return r
	}
	if len(f.pendingAsync(st)) > 0 {
		return cuda.ErrorNotReady
	}
	return cuda.Success
}
