package cuda

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/mlbuild/mlbuild/rt/gpuhost"
)

// Options choose the GPU and how the Engine uses it.
type Options struct {
	// Ordinal is the GPU to open, as the driver numbers them (0 first). A
	// multi-GPU program opens one Engine per ordinal over one Libraries.
	Ordinal int
	// Libraries are the function tables to call; nil loads NVIDIA's with
	// LoadLibraries. Tests pass cuda/fakecuda's.
	Libraries *Libraries
	// KernelCacheDir is where compiled kernels are kept ("" for
	// $MLBUILD_CUDA_CACHE or the user cache folder, "off" for nowhere).
	KernelCacheDir string
	// Blocking runs every kernel and GEMM of a sequence as its own launch
	// and waits for it, instead of replaying the sequence as one CUDA
	// graph: many times slower, but a GPU fault names the op, kernel and
	// sequence that hit it (MLBUILD_CUDA_BLOCKING=1).
	Blocking bool
	// Profile times every op of a blocking sequence (Blocking must be
	// set) on the GPU: each launch enqueues the ops back to back, as the
	// graph would run them, with a timing event before the first and
	// after each, waits once, and adds the GPU time between the events
	// around each op (the first launch of a sequence not counted). The
	// table of those times and each sequence's GPU time a launch go to
	// ProfileOut (nil: standard error) when the Device closes (profile.go;
	// MLBUILD_CUDA_PROFILE=1). A fault then names the sequence but not its
	// op: Blocking alone does.
	Profile    bool
	ProfileOut io.Writer
	// CompileJobs is how many parts of a program's kernels NVRTC compiles
	// at once (Engine.LoadModules); 0 is $MLBUILD_NVRTC_JOBS, else the
	// program's threads (GOMAXPROCS).
	CompileJobs int
	// ConvTrials is how many of the cuDNN algorithms the heuristics
	// propose for a convolution call PrepareConv runs and times in a
	// graph, to take the fastest; 1 takes the heuristics' first that
	// runs, untimed. 0 is $MLBUILD_CUDNN_TRIALS, else 4 (convTrials), or
	// 1 where Blocking is set: a blocking engine captures no graph unless
	// it is asked to.
	ConvTrials int
	// Getenv reads the environment; nil is os.Getenv.
	Getenv func(string) string
}

// compileJobs is Options.CompileJobs, its default resolved.
func (o Options) compileJobs() int {
	if o.CompileJobs > 0 {
		return o.CompileJobs
	}
	if n, err := strconv.Atoi(o.Getenv("MLBUILD_NVRTC_JOBS")); err == nil && n > 0 {
		return n
	}
	return runtime.GOMAXPROCS(0)
}

// convTrials is Options.ConvTrials, its default resolved.
func (o Options) convTrials() int {
	if o.ConvTrials > 0 {
		return o.ConvTrials
	}
	if n, err := strconv.Atoi(o.Getenv("MLBUILD_CUDNN_TRIALS")); err == nil && n > 0 {
		return n
	}
	if o.Blocking {
		return 1
	}
	return convTrials
}

// profileOut is where the profile goes.
func (o Options) profileOut() io.Writer {
	if o.ProfileOut != nil {
		return o.ProfileOut
	}
	return os.Stderr
}

// blasWorkspaceBytes is the workspace given to cuBLAS up front, so that
// GEMMs captured in a graph never need to allocate (32 MiB, what Hopper's
// kernels may use).
const blasWorkspaceBytes = 32 << 20

// Engine owns one GPU: its primary context, one stream, one cuBLAS handle,
// the loaded kernel modules and the allocations. A CUDA context is current
// per OS thread, so every library call runs on one goroutine locked to its
// thread for the Engine's life; the methods send calls there and wait.
// Methods are safe to call from any goroutine, one call at a time running.
type Engine struct {
	lib  *Libraries
	opts Options

	mu    sync.Mutex  // one call on the thread at a time
	calls chan func() // run on the engine's thread
	done  chan struct{}

	dev    DeviceHandle
	ctx    Context
	stream Stream
	// side is the stream of the sums that run beside the stream's work
	// (Communicator.StartAllReduce), made on first use; toSide and toMain
	// are the events that order the two.
	side           Stream
	toSide, toMain Event
	blas           BLASHandle
	workspace      DevicePtr
	// dnn is the cuDNN handle, made by the first library convolution's
	// PrepareConv (0 before); dnnWork is cuDNN's workspace of
	// dnnWorkBytes, and convs the descriptors and algorithms of each
	// geometry (conv.go).
	dnn          DNNHandle
	dnnWork      DevicePtr
	dnnWorkBytes uintptr
	convs        map[convKey]*convPlan
	closed       bool
	capturing    bool

	name         string
	ccMajor      int32
	ccMinor      int32
	totalMem     uintptr
	driverVer    int32
	blasVersion  string
	nvrtcVersion string
	archs        []int32 // sm numbers NVRTC supports; nil when it cannot say

	cache   kernelCache
	modules []Module
	loads   []KernelLoad
	allocs  map[DevicePtr]uintptr
	pinned  [][]byte // host memory page-locked by Pin, kept referenced until Close
}

// KernelLoad is how one kernel source was loaded, for `info` and the
// start-up figures.
type KernelLoad struct {
	Arch      string // e.g. "sm_90" (CUBIN) or "compute_90" (PTX)
	FromCache bool   // every part came from the kernel cache
	Took      time.Duration
	CacheFile string // the first part's; "" when the cache is off
	// Parts is how many modules the source was compiled and loaded as
	// (LoadModules), Compiled how many of them NVRTC compiled (the others
	// came from the cache) and Jobs how many compiles ran at once.
	Parts, Compiled, Jobs int
}

// Open starts an Engine on the GPU opts.Ordinal. On a machine without a
// usable GPU, driver or library, the error wraps ErrNoDevice.
func Open(opts Options) (*Engine, error) {
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if opts.Libraries == nil {
		l, err := LoadLibraries()
		if err != nil {
			return nil, err
		}
		opts.Libraries = l
	}
	e := &Engine{lib: opts.Libraries, opts: opts, calls: make(chan func()), done: make(chan struct{}),
		allocs: map[DevicePtr]uintptr{}}
	e.cache.dir = cacheDirFor(opts.KernelCacheDir, opts.Getenv)
	go e.loop()
	if err := e.do(e.start); err != nil {
		e.do(e.release)
		close(e.calls)
		return nil, err
	}
	return e, nil
}

// loop runs calls on the engine's OS thread until Close. The thread stays
// locked when the goroutine ends, so the runtime retires it with the
// context current on it.
func (e *Engine) loop() {
	runtime.LockOSThread()
	for f := range e.calls {
		f()
		e.done <- struct{}{}
	}
}

// do runs f on the engine's thread and returns its error; after Close,
// errClosed (a call racing Close, from another goroutine, gets an error
// rather than a send on the closed channel).
func (e *Engine) do(f func() error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errClosed
	}
	return e.hop(f)
}

// hop runs f on the engine's thread; e.mu is held.
func (e *Engine) hop(f func() error) error {
	var err error
	e.calls <- func() { err = f() }
	<-e.done
	return err
}

// doHere runs f on the calling goroutine's own OS thread, with the
// engine's context made current there, and returns its error. It saves
// the two thread switches of do (each a wake-up of a sleeping thread,
// together tens of microseconds), which add up in the calls of a
// latency-bound loop: a copy, a launch, a wait. While a capture is open
// it goes through the engine's thread, which alone may add to it.
func (e *Engine) doHere(f func() error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errClosed
	}
	if e.capturing {
		return e.hop(f)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := e.lib.driverError("cuCtxSetCurrent", e.lib.Driver.CtxSetCurrent(e.ctx), "on the calling thread"); err != nil {
		return err
	}
	return f()
}

// start initialises the driver and makes the GPU's primary context current
// on the engine's thread; it runs there.
func (e *Engine) start() error {
	d, l := e.lib.Driver, e.lib
	if err := l.driverError("cuInit", d.Init(0), "initialising the driver"); err != nil {
		return fmt.Errorf("%w (%w)", err, ErrNoDevice)
	}
	var count int32
	if err := l.driverError("cuDeviceGetCount", d.DeviceGetCount(&count), ""); err != nil {
		return err
	}
	if count == 0 {
		return fmt.Errorf("cuda: the driver sees no GPU: %w", ErrNoDevice)
	}
	if e.opts.Ordinal < 0 || e.opts.Ordinal >= int(count) {
		return fmt.Errorf("cuda: GPU %d asked for, but the driver sees %d (0 to %d): %w", e.opts.Ordinal, count, count-1, ErrNoDevice)
	}
	if err := l.driverError("cuDeviceGet", d.DeviceGet(&e.dev, int32(e.opts.Ordinal)), ""); err != nil {
		return err
	}
	var name [256]byte
	if err := l.driverError("cuDeviceGetName", d.DeviceGetName(&name[0], int32(len(name)), e.dev), ""); err != nil {
		return err
	}
	e.name = cString(&name[0])
	for _, a := range []struct {
		attr int32
		v    *int32
	}{{AttrComputeCapabilityMajor, &e.ccMajor}, {AttrComputeCapabilityMinor, &e.ccMinor}} {
		if err := l.driverError("cuDeviceGetAttribute", d.DeviceGetAttribute(a.v, a.attr, e.dev), "compute capability"); err != nil {
			return err
		}
	}
	if err := l.driverError("cuDeviceTotalMem_v2", d.DeviceTotalMem(&e.totalMem, e.dev), ""); err != nil {
		return err
	}
	if err := l.driverError("cuDriverGetVersion", d.DriverGetVersion(&e.driverVer), ""); err != nil {
		return err
	}
	if err := l.driverError("cuDevicePrimaryCtxRetain", d.DevicePrimaryCtxRetain(&e.ctx, e.dev), ""); err != nil {
		return err
	}
	if err := l.driverError("cuCtxSetCurrent", d.CtxSetCurrent(e.ctx), ""); err != nil {
		return err
	}
	// Flags 0: a blocking stream, ordered after the legacy stream's work
	// (cuMemsetD8 of a new buffer).
	if err := l.driverError("cuStreamCreate", d.StreamCreate(&e.stream, 0), ""); err != nil {
		return err
	}
	b := l.BLAS
	if err := l.blasError("cublasCreate_v2", b.Create(&e.blas), ""); err != nil {
		return err
	}
	if err := l.blasError("cublasSetStream_v2", b.SetStream(e.blas, e.stream), ""); err != nil {
		return err
	}
	// The default math: cublasSgemm exact in fp32. A GEMM in a fast
	// precision asks for it by its compute type (GemmEx), not the handle.
	if err := l.blasError("cublasSetMathMode", b.SetMathMode(e.blas, BLASDefaultMath), ""); err != nil {
		return err
	}
	if b.SetWorkspace != nil {
		if err := e.alloc(&e.workspace, blasWorkspaceBytes, "the cuBLAS workspace"); err != nil {
			return err
		}
		if err := l.blasError("cublasSetWorkspace_v2", b.SetWorkspace(e.blas, e.workspace, blasWorkspaceBytes), ""); err != nil {
			return err
		}
	}
	var v int32
	if err := l.blasError("cublasGetVersion_v2", b.GetVersion(e.blas, &v), ""); err != nil {
		return err
	}
	e.blasVersion = fmt.Sprintf("%d.%d.%d", v/10000, v/100%100, v%100)
	var major, minor int32
	if err := l.nvrtcError("nvrtcVersion", l.NVRTC.Version(&major, &minor), ""); err != nil {
		return err
	}
	e.nvrtcVersion = fmt.Sprintf("%d.%d", major, minor)
	if n := l.NVRTC.GetNumSupportedArchs; n != nil && l.NVRTC.GetSupportedArchs != nil {
		var count int32
		if n(&count) == NVRTCSuccess && count > 0 {
			archs := make([]int32, count)
			if l.NVRTC.GetSupportedArchs(&archs[0]) == NVRTCSuccess {
				e.archs = archs
			}
		}
	}
	return nil
}

// release frees what start and later calls made, on the engine's thread,
// and returns the first error.
func (e *Engine) release() error {
	d, l := e.lib.Driver, e.lib
	var errs []error
	if e.stream != 0 {
		errs = append(errs, l.driverError("cuStreamSynchronize", d.StreamSynchronize(e.stream), "closing"))
	}
	if e.side != 0 {
		errs = append(errs, l.driverError("cuStreamSynchronize", d.StreamSynchronize(e.side), "closing the sums' stream"))
		errs = append(errs, l.driverError("cuEventDestroy_v2", d.EventDestroy(e.toSide), ""))
		errs = append(errs, l.driverError("cuEventDestroy_v2", d.EventDestroy(e.toMain), ""))
		errs = append(errs, l.driverError("cuStreamDestroy_v2", d.StreamDestroy(e.side), ""))
		e.side, e.toSide, e.toMain = 0, 0, 0
	}
	errs = append(errs, e.releaseDNN())
	for _, m := range e.modules {
		errs = append(errs, l.driverError("cuModuleUnload", d.ModuleUnload(m), ""))
	}
	e.modules = nil
	if e.blas != 0 {
		errs = append(errs, l.blasError("cublasDestroy_v2", l.BLAS.Destroy(e.blas), ""))
		e.blas = 0
	}
	for _, b := range e.pinned {
		errs = append(errs, l.driverError("cuMemHostUnregister", d.MemHostUnregister(unsafe.Pointer(unsafe.SliceData(b))), ""))
	}
	e.pinned = nil
	ptrs := make([]DevicePtr, 0, len(e.allocs))
	for p := range e.allocs {
		ptrs = append(ptrs, p)
	}
	slices.Sort(ptrs)
	for _, p := range ptrs {
		errs = append(errs, l.driverError("cuMemFree_v2", d.MemFree(p), ""))
		delete(e.allocs, p)
	}
	if e.stream != 0 {
		errs = append(errs, l.driverError("cuStreamDestroy_v2", d.StreamDestroy(e.stream), ""))
		e.stream = 0
	}
	if e.ctx != 0 {
		errs = append(errs, l.driverError("cuDevicePrimaryCtxRelease_v2", d.DevicePrimaryCtxRelease(e.dev), ""))
		e.ctx = 0
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Close synchronises, frees every allocation, module and handle, releases
// the context and ends the engine's thread. Calling it again does nothing.
func (e *Engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	err := e.hop(e.release)
	e.closed = true
	close(e.calls)
	return err
}

// Name is the GPU's name.
func (e *Engine) Name() string { return e.name }

// ComputeCapability is the GPU's (major, minor), e.g. (9, 0) for Hopper.
func (e *Engine) ComputeCapability() (int, int) { return int(e.ccMajor), int(e.ccMinor) }

// Libraries are the function tables the Engine calls.
func (e *Engine) Libraries() *Libraries { return e.lib }

// MemInfo returns the GPU's free and total memory in bytes.
func (e *Engine) MemInfo() (free, total uint64, err error) {
	if e.closed {
		return 0, 0, errClosed
	}
	err = e.do(func() error {
		var f, t uintptr
		err := e.lib.driverError("cuMemGetInfo_v2", e.lib.Driver.MemGetInfo(&f, &t), "")
		free, total = uint64(f), uint64(t)
		return err
	})
	return free, total, err
}

// alloc allocates n bytes into *p on the engine's thread; when the GPU is
// out of memory the error says how much was asked for and how much is free.
func (e *Engine) alloc(p *DevicePtr, n uintptr, what string) error {
	d, l := e.lib.Driver, e.lib
	r := d.MemAlloc(p, n)
	if r == ErrorOutOfMemory {
		var free, total uintptr
		if d.MemGetInfo(&free, &total) == Success {
			return fmt.Errorf("cuda: not enough GPU memory for %s: %d bytes needed, %d of %d bytes free on %s; make the model or the batch smaller, or free the GPU of other programs: %w",
				what, n, free, total, e.name, l.driverError("cuMemAlloc_v2", r, ""))
		}
	}
	if err := l.driverError("cuMemAlloc_v2", r, "allocating "+what); err != nil {
		return err
	}
	e.allocs[*p] = n
	return nil
}

// Alloc allocates n zeroed bytes; what names the allocation in errors.
func (e *Engine) Alloc(n int, what string) (DevicePtr, error) {
	if e.closed {
		return 0, errClosed
	}
	if n <= 0 {
		return 0, fmt.Errorf("cuda: allocating %s: %d bytes, want > 0", what, n)
	}
	var p DevicePtr
	err := e.do(func() error {
		if err := e.alloc(&p, uintptr(n), fmt.Sprintf("%s (%d bytes)", what, n)); err != nil {
			return err
		}
		return e.lib.driverError("cuMemsetD8_v2", e.lib.Driver.MemsetD8(p, 0, uintptr(n)), "zeroing "+what)
	})
	return p, err
}

// Free releases an allocation of Alloc.
func (e *Engine) Free(p DevicePtr) error {
	if e.closed {
		return errClosed
	}
	return e.do(func() error {
		if _, ok := e.allocs[p]; !ok {
			return fmt.Errorf("cuda: Free of %#x, which this engine did not allocate or already freed", p)
		}
		delete(e.allocs, p)
		return e.lib.driverError("cuMemFree_v2", e.lib.Driver.MemFree(p), "")
	})
}

// Synchronize waits for everything queued on the engine's stream.
func (e *Engine) Synchronize() error {
	if e.closed {
		return errClosed
	}
	return e.doHere(func() error {
		return e.lib.driverError("cuStreamSynchronize", e.lib.Driver.StreamSynchronize(e.stream), "")
	})
}

// CopyIn copies src to device address dst, after waiting for the stream.
func (e *Engine) CopyIn(dst DevicePtr, src []byte) error {
	if e.closed {
		return errClosed
	}
	if len(src) == 0 {
		return nil
	}
	return e.doHere(func() error {
		d := e.lib.Driver
		if err := e.lib.driverError("cuStreamSynchronize", d.StreamSynchronize(e.stream), "before a copy to the GPU"); err != nil {
			return err
		}
		err := e.lib.driverError("cuMemcpyHtoD_v2", d.MemcpyHtoD(dst, unsafe.Pointer(unsafe.SliceData(src)), uintptr(len(src))), "")
		runtime.KeepAlive(src)
		return err
	})
}

// CopyOut copies len(dst) bytes from device address src, after waiting for
// the stream.
func (e *Engine) CopyOut(dst []byte, src DevicePtr) error {
	if e.closed {
		return errClosed
	}
	if len(dst) == 0 {
		return nil
	}
	return e.doHere(func() error {
		d := e.lib.Driver
		if err := e.lib.driverError("cuStreamSynchronize", d.StreamSynchronize(e.stream), "before a copy from the GPU"); err != nil {
			return err
		}
		err := e.lib.driverError("cuMemcpyDtoH_v2", d.MemcpyDtoH(unsafe.Pointer(unsafe.SliceData(dst)), src, uintptr(len(dst))), "")
		runtime.KeepAlive(dst)
		return err
	})
}

// HostCopy is one copy between host memory and the GPU: len(Host) bytes
// at device address Dev.
type HostCopy struct {
	Dev  DevicePtr
	Host []byte
}

// Call queues the copies in up to the GPU, one run of exec (none when 0)
// and the copies out back to the host on the engine's stream, then waits
// once for all of it: a latency-bound call (an inference) costs one wait
// instead of one for each copy. The copies are asynchronous, so they
// overlap nothing but also hold the thread for no extra wait; from
// page-locked memory (Pin) they run at the link's speed.
func (e *Engine) Call(in []HostCopy, exec GraphExec, out []HostCopy) error {
	if e.closed {
		return errClosed
	}
	return e.doHere(func() error {
		d, l := e.lib.Driver, e.lib
		for _, c := range in {
			if len(c.Host) == 0 {
				continue
			}
			if err := l.driverError("cuMemcpyHtoDAsync_v2", d.MemcpyHtoDAsync(c.Dev, unsafe.Pointer(unsafe.SliceData(c.Host)), uintptr(len(c.Host)), e.stream), ""); err != nil {
				return err
			}
		}
		if exec != 0 {
			if err := l.driverError("cuGraphLaunch", d.GraphLaunch(exec, e.stream), ""); err != nil {
				return err
			}
		}
		for _, c := range out {
			if len(c.Host) == 0 {
				continue
			}
			if err := l.driverError("cuMemcpyDtoHAsync_v2", d.MemcpyDtoHAsync(unsafe.Pointer(unsafe.SliceData(c.Host)), c.Dev, uintptr(len(c.Host)), e.stream), ""); err != nil {
				return err
			}
		}
		err := l.driverError("cuStreamSynchronize", d.StreamSynchronize(e.stream), "")
		runtime.KeepAlive(in)
		runtime.KeepAlive(out)
		return err
	})
}

// Arch is the architecture NVRTC compiles for on this GPU and the image
// format: sm_XY and CUBIN when NVRTC knows the GPU's architecture, else
// PTX for the newest compute_XY it knows that the GPU runs (the driver
// compiles that PTX at load).
func (e *Engine) Arch() (arch, format string, err error) {
	sm := e.ccMajor*10 + e.ccMinor
	if e.archs == nil {
		return fmt.Sprintf("compute_%d", sm), "ptx", nil
	}
	if slices.Contains(e.archs, sm) && e.lib.NVRTC.GetCUBIN != nil && e.lib.NVRTC.GetCUBINSize != nil {
		return fmt.Sprintf("sm_%d", sm), "cubin", nil
	}
	best := int32(-1)
	for _, a := range e.archs {
		if a <= sm && a > best {
			best = a
		}
	}
	if best < 0 {
		return "", "", fmt.Errorf("cuda: NVRTC %s compiles for sm_%d and newer, this GPU is sm_%d: use an older NVRTC (set MLBUILD_NVRTC_LIB): %w",
			e.nvrtcVersion, slices.Min(e.archs), sm, ErrNoDevice)
	}
	return fmt.Sprintf("compute_%d", best), "ptx", nil
}

// LoadModule compiles CUDA C++ source with NVRTC for this GPU (or takes
// the image from the kernel cache) and loads it. Kernels are found in the
// loaded modules by Function, in load order.
func (e *Engine) LoadModule(source string) (KernelLoad, error) {
	return e.LoadModules([]string{source}, 1)
}

// LoadModules is LoadModule for a source cut into parts (splitSource): the
// parts the kernel cache lacks are compiled by NVRTC, up to jobs at once
// (NVRTC compiles one program on one thread), then every part is loaded,
// in order, as a module of its own. A compile error names the part and
// its first kernel and carries NVRTC's log.
func (e *Engine) LoadModules(parts []string, jobs int) (KernelLoad, error) {
	if e.closed {
		return KernelLoad{}, errClosed
	}
	start := time.Now()
	arch, format, err := e.Arch()
	if err != nil {
		return KernelLoad{}, err
	}
	options := []string{"--gpu-architecture=" + arch}
	load := KernelLoad{Arch: arch, FromCache: true, Parts: len(parts), Jobs: max(1, min(jobs, len(parts)))}
	keys := make([]string, len(parts))
	images := make([][]byte, len(parts))
	for i, src := range parts {
		keys[i] = cacheKeyLines(src, e.nvrtcVersion, arch, format, options)
		if i == 0 && e.cache.dir != "" {
			load.CacheFile = e.cache.path(keys[i])
		}
		if image, ok := e.cache.get(keys[i]); ok {
			images[i] = image
		}
	}
	// compile writes only images[i] and part i's cache file, so parts
	// compile side by side
	compile := func(i int) error {
		image, err := e.compile(parts[i], format, options)
		if err != nil {
			if len(parts) > 1 {
				return fmt.Errorf("part %d of %d (from kernel %s): %w", i+1, len(parts), firstKernel(parts[i]), err)
			}
			return err
		}
		images[i] = image
		e.cache.put(keys[i], image) // a cache that cannot be written only costs time
		return nil
	}
	var todo []int
	for i := range parts {
		if images[i] == nil {
			todo = append(todo, i)
		}
	}
	if err := compileEach(todo, load.Jobs, compile); err != nil {
		return KernelLoad{}, err
	}
	load.Compiled = len(todo)
	err = e.do(func() error {
		for i := range parts {
			mod, err := e.loadImage(images[i])
			if err != nil && !slices.Contains(todo, i) { // a cached image the driver refuses is compiled again
				load.Compiled++
				if err = compile(i); err == nil {
					mod, err = e.loadImage(images[i])
				}
			}
			if err != nil {
				return err
			}
			e.modules = append(e.modules, mod)
		}
		return nil
	})
	if err != nil {
		return KernelLoad{}, err
	}
	load.FromCache = load.Compiled == 0
	load.Took = time.Since(start)
	e.loads = append(e.loads, load)
	return load, nil
}

// compileEach runs compile(i) for every i of todo, at most jobs at a time,
// and returns the error of the first of todo that failed.
func compileEach(todo []int, jobs int, compile func(int) error) error {
	errs := make([]error, len(todo))
	sem := make(chan struct{}, max(jobs, 1))
	var wg sync.WaitGroup
	for n, i := range todo {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[n] = compile(i)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// firstKernel is the name of the first kernel a part defines.
func firstKernel(part string) string {
	if m := kernelNames.FindStringSubmatch(part); m != nil {
		return m[1]
	}
	return "(none)"
}

// KernelLoads lists how each LoadModule and LoadModules went.
func (e *Engine) KernelLoads() []KernelLoad { return slices.Clone(e.loads) }

// loadImage loads a CUBIN or NUL-terminated PTX image on the engine's thread.
func (e *Engine) loadImage(image []byte) (Module, error) {
	var mod Module
	err := e.lib.driverError("cuModuleLoadData", e.lib.Driver.ModuleLoadData(&mod, unsafe.Pointer(unsafe.SliceData(image))), "loading the compiled kernels")
	runtime.KeepAlive(image)
	return mod, err
}

// cStrings returns NUL-terminated copies of ss and pointers to them; keep
// the first result alive while the pointers are used.
func cStrings(ss []string) ([][]byte, []*byte) {
	bufs := make([][]byte, len(ss))
	ptrs := make([]*byte, len(ss)+1)
	for i, s := range ss {
		bufs[i] = append([]byte(s), 0)
		ptrs[i] = &bufs[i][0]
	}
	return bufs, ptrs
}

// compile runs NVRTC on source and returns the image in format ("cubin" or
// "ptx", NUL-terminated). A compile error carries NVRTC's log.
func (e *Engine) compile(source, format string, options []string) ([]byte, error) {
	n, l := e.lib.NVRTC, e.lib
	var prog Program
	if err := l.nvrtcError("nvrtcCreateProgram", n.CreateProgram(&prog, source, "mlbuild_kernels.cu", 0, nil, nil), ""); err != nil {
		return nil, err
	}
	defer n.DestroyProgram(&prog)
	bufs, ptrs := cStrings(options)
	r := n.CompileProgram(prog, int32(len(options)), &ptrs[0])
	runtime.KeepAlive(bufs)
	if r != NVRTCSuccess {
		err := l.nvrtcError("nvrtcCompileProgram", r, "compiling the kernels with "+strings.Join(options, " "))
		var size uintptr
		if n.GetProgramLogSize(prog, &size) == NVRTCSuccess && size > 1 {
			log := make([]byte, size)
			if n.GetProgramLog(prog, &log[0]) == NVRTCSuccess {
				err = fmt.Errorf("%w\n%s", err, strings.TrimRight(cString(&log[0]), "\n"))
			}
		}
		return nil, err
	}
	getSize, get, call := n.GetPTXSize, n.GetPTX, "nvrtcGetPTX"
	if format == "cubin" {
		getSize, get, call = n.GetCUBINSize, n.GetCUBIN, "nvrtcGetCUBIN"
	}
	var size uintptr
	if err := l.nvrtcError(call+"Size", getSize(prog, &size), ""); err != nil {
		return nil, err
	}
	if size == 0 {
		return nil, fmt.Errorf("cuda: %s: NVRTC produced an empty image", call)
	}
	image := make([]byte, size, size+1)
	if err := l.nvrtcError(call, get(prog, &image[0]), ""); err != nil {
		return nil, err
	}
	if format == "ptx" && image[len(image)-1] != 0 {
		image = append(image, 0)
	}
	return image, nil
}

// ErrNoKernel is wrapped by Function's error for a kernel no loaded module
// defines.
var ErrNoKernel = errors.New("no such kernel")

// Function finds kernel name in the loaded modules.
func (e *Engine) Function(name string) (Function, error) {
	if e.closed {
		return 0, errClosed
	}
	var fn Function
	err := e.do(func() error {
		for _, m := range e.modules {
			r := e.lib.Driver.ModuleGetFunction(&fn, m, name)
			if r == Success {
				return nil
			}
			if r != ErrorNotFound {
				return e.lib.driverError("cuModuleGetFunction", r, "kernel "+name)
			}
		}
		return fmt.Errorf("cuda: kernel %q: %w in the %d loaded modules", name, ErrNoKernel, len(e.modules))
	})
	return fn, err
}

// Launch queues fn on the engine's stream as groups blocks of threads
// threads, with one device pointer per kernel parameter.
func (e *Engine) Launch(fn Function, groups, threads int, args []DevicePtr) error {
	if e.closed {
		return errClosed
	}
	vals := slices.Clone(args)
	params := make([]unsafe.Pointer, len(vals)+1)
	for i := range vals {
		params[i] = unsafe.Pointer(&vals[i])
	}
	return e.doHere(func() error {
		r := e.lib.Driver.LaunchKernel(fn, uint32(groups), 1, 1, uint32(threads), 1, 1, 0, e.stream, &params[0], nil)
		runtime.KeepAlive(vals)
		return e.lib.driverError("cuLaunchKernel", r, "")
	})
}

// GemmArgs is one row-major float32 GEMM, C = Alpha·op(A)·op(B) + Beta·C
// with C M×N and inner dimension K; LDA, LDB, LDC are the stored matrices'
// row strides in elements.
type GemmArgs struct {
	TransA, TransB bool
	M, N, K        int
	Alpha, Beta    float32
	A, B, C        DevicePtr
	LDA, LDB, LDC  int
	// Batch above 1 makes it one strided batched GEMM: the i-th product
	// reads and writes the matrices StrideA·i, StrideB·i and StrideC·i
	// elements after A, B and C.
	Batch                     int
	StrideA, StrideB, StrideC int
	// Precision is the products' arithmetic: PrecisionF32 calls
	// cublasSgemm (exact fp32), the others cublasGemmEx on float32
	// matrices with their fast compute type (computeTypes).
	Precision gpuhost.Precision
	// Elem is A's and B's element type: ElemBF16 (with PrecisionBF16)
	// calls cublasGemmEx on CUDA_R_16BF A and B, a CUDA_R_32F C and
	// CUBLAS_COMPUTE_32F; LDA, LDB, StrideA and StrideB then count
	// bfloat16 elements.
	Elem gpuhost.Elem
}

// computeTypes are the cuBLAS compute types of the fast precisions: cuBLAS
// may round A's and B's float32 elements to bfloat16 (or TF32) for the
// tensor cores and accumulates in float32.
var computeTypes = map[gpuhost.Precision]struct {
	compute int32
	name    string
}{
	gpuhost.PrecisionBF16: {ComputeFast16BF, "CUBLAS_COMPUTE_32F_FAST_16BF"},
	gpuhost.PrecisionTF32: {ComputeFastTF32, "CUBLAS_COMPUTE_32F_FAST_TF32"},
}

// Gemm queues one cuBLAS GEMM on the engine's stream: cublasSgemm for an
// f32 GEMM, cublasGemmEx with the precision's compute type for another
// (their strided batched forms for a batch). cuBLAS is
// column-major, and a row-major matrix read column-major is its transpose,
// so the row-major C = op(A)·op(B) is computed as the column-major
// Cᵀ = op(B)ᵀ·op(A)ᵀ: B first, A second, m and n swapped, the transpose
// flags and the leading dimensions (the row strides) unchanged.
func (e *Engine) Gemm(g GemmArgs) error {
	if e.closed {
		return errClosed
	}
	op := func(t bool) Operation {
		if t {
			return OpT
		}
		return OpN
	}
	alpha, beta := g.Alpha, g.Beta
	if g.Precision != gpuhost.PrecisionF32 || g.Elem != gpuhost.ElemF32 {
		return e.gemmEx(g, op(g.TransA), op(g.TransB), alpha, beta)
	}
	if g.Batch > 1 {
		return e.doHere(func() error {
			s := e.lib.BLAS.SgemmStridedBatched(e.blas, op(g.TransB), op(g.TransA), int32(g.N), int32(g.M), int32(g.K),
				&alpha, g.B, int32(g.LDB), int64(g.StrideB), g.A, int32(g.LDA), int64(g.StrideA), &beta, g.C, int32(g.LDC), int64(g.StrideC), int32(g.Batch))
			return e.lib.blasError("cublasSgemmStridedBatched", s, fmt.Sprintf("%d %dx%dx%d GEMMs", g.Batch, g.M, g.N, g.K))
		})
	}
	return e.doHere(func() error {
		s := e.lib.BLAS.Sgemm(e.blas, op(g.TransB), op(g.TransA), int32(g.N), int32(g.M), int32(g.K),
			&alpha, g.B, int32(g.LDB), g.A, int32(g.LDA), &beta, g.C, int32(g.LDC))
		return e.lib.blasError("cublasSgemm_v2", s, fmt.Sprintf("%dx%dx%d GEMM", g.M, g.N, g.K))
	})
}

// gemmEx queues g, whose precision is not f32 or whose A and B are
// bfloat16, as cublasGemmEx (or cublasGemmStridedBatchedEx) with the
// default algorithm, row-major as Gemm says: on float32 matrices with the
// precision's compute type, or on bfloat16 A and B (CUDA_R_16BF) with
// CUBLAS_COMPUTE_32F, the tensor cores' bf16 products summed in float32.
func (e *Engine) gemmEx(g GemmArgs, opA, opB Operation, alpha, beta float32) error {
	ct, ok := computeTypes[g.Precision]
	if !ok {
		return fmt.Errorf("cuda: a %dx%dx%d GEMM in precision %v, which this device does not compute (f32, bf16 or tf32)", g.M, g.N, g.K, g.Precision)
	}
	ab := DataR32F
	switch {
	case g.Elem == gpuhost.ElemBF16 && g.Precision == gpuhost.PrecisionBF16:
		ab, ct.compute, ct.name = DataR16BF, Compute32F, "CUDA_R_16BF operands, CUBLAS_COMPUTE_32F"
	case g.Elem != gpuhost.ElemF32:
		return fmt.Errorf("cuda: a %dx%dx%d GEMM of %v operands in precision %v: bfloat16 operands are multiplied in bf16", g.M, g.N, g.K, g.Elem, g.Precision)
	}
	what := fmt.Sprintf("%dx%dx%d GEMM, %s", g.M, g.N, g.K, ct.name)
	if g.Batch > 1 {
		what = fmt.Sprintf("%d %dx%dx%d GEMMs, %s", g.Batch, g.M, g.N, g.K, ct.name)
		return e.doHere(func() error {
			s := e.lib.BLAS.GemmStridedBatchedEx(e.blas, opB, opA, int32(g.N), int32(g.M), int32(g.K),
				&alpha, g.B, ab, int32(g.LDB), int64(g.StrideB), g.A, ab, int32(g.LDA), int64(g.StrideA),
				&beta, g.C, DataR32F, int32(g.LDC), int64(g.StrideC), int32(g.Batch), ct.compute, GemmDefault)
			return e.lib.blasError("cublasGemmStridedBatchedEx", s, what)
		})
	}
	return e.doHere(func() error {
		s := e.lib.BLAS.GemmEx(e.blas, opB, opA, int32(g.N), int32(g.M), int32(g.K),
			&alpha, g.B, ab, int32(g.LDB), g.A, ab, int32(g.LDA), &beta, g.C, DataR32F, int32(g.LDC), ct.compute, GemmDefault)
		return e.lib.blasError("cublasGemmEx", s, what)
	})
}

// BeginCapture starts capturing the stream's work into a graph, in
// thread-local mode: an unsafe call (an allocation, a synchronous copy)
// from the engine's thread during the capture fails instead of running.
func (e *Engine) BeginCapture() error {
	if e.closed {
		return errClosed
	}
	return e.do(func() error {
		if err := e.lib.driverError("cuStreamBeginCapture_v2", e.lib.Driver.StreamBeginCapture(e.stream, CaptureModeThreadLocal), ""); err != nil {
			return err
		}
		e.capturing = true
		return nil
	})
}

// EndCapture ends the capture and instantiates its graph.
func (e *Engine) EndCapture() (GraphExec, error) {
	if e.closed {
		return 0, errClosed
	}
	var exec GraphExec
	err := e.do(func() error {
		d, l := e.lib.Driver, e.lib
		var g Graph
		e.capturing = false
		if err := l.driverError("cuStreamEndCapture", d.StreamEndCapture(e.stream, &g), ""); err != nil {
			return err
		}
		defer d.GraphDestroy(g)
		return l.driverError("cuGraphInstantiateWithFlags", d.GraphInstantiate(&exec, g, 0), "")
	})
	return exec, err
}

// sideStream makes the stream of the sums that run beside the engine's
// stream, and its two events, once; it runs on the engine's thread.
func (e *Engine) sideStream() error {
	if e.side != 0 {
		return nil
	}
	d, l := e.lib.Driver, e.lib
	var s Stream
	if err := l.driverError("cuStreamCreate", d.StreamCreate(&s, 0), "the sums' stream"); err != nil {
		return err
	}
	var a, b Event
	if err := l.driverError("cuEventCreate", d.EventCreate(&a, EventDisableTiming), ""); err != nil {
		d.StreamDestroy(s)
		return err
	}
	if err := l.driverError("cuEventCreate", d.EventCreate(&b, EventDisableTiming), ""); err != nil {
		d.EventDestroy(a)
		d.StreamDestroy(s)
		return err
	}
	e.side, e.toSide, e.toMain = s, a, b
	return nil
}

// order makes the work enqueued on to after this call wait for the work
// enqueued on from before it, through ev; it runs on the engine's thread.
func (e *Engine) order(from, to Stream, ev Event) error {
	d, l := e.lib.Driver, e.lib
	if err := l.driverError("cuEventRecord", d.EventRecord(ev, from), ""); err != nil {
		return err
	}
	return l.driverError("cuStreamWaitEvent", d.StreamWaitEvent(to, ev, 0), "")
}

// LaunchGraph queues one run of an instantiated graph on the stream.
func (e *Engine) LaunchGraph(exec GraphExec) error {
	if e.closed {
		return errClosed
	}
	return e.doHere(func() error {
		return e.lib.driverError("cuGraphLaunch", e.lib.Driver.GraphLaunch(exec, e.stream), "")
	})
}

// Pin page-locks the host memory of b for the engine's life, so that
// copies between it and the GPU run at the link's full speed instead of
// through the driver's staging buffer. The engine keeps b referenced and
// Close unpins it; b stays valid Go memory afterwards.
func (e *Engine) Pin(b []byte) error {
	if e.closed {
		return errClosed
	}
	if len(b) == 0 {
		return nil
	}
	return e.doHere(func() error {
		if err := e.lib.driverError("cuMemHostRegister_v2", e.lib.Driver.MemHostRegister(unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b)), 0), fmt.Sprintf("page-locking %d bytes of host memory", len(b))); err != nil {
			return err
		}
		e.pinned = append(e.pinned, b)
		return nil
	})
}

// DestroyGraph frees an instantiated graph.
func (e *Engine) DestroyGraph(exec GraphExec) error {
	if e.closed {
		return errClosed
	}
	return e.do(func() error {
		return e.lib.driverError("cuGraphExecDestroy", e.lib.Driver.GraphExecDestroy(exec), "")
	})
}
