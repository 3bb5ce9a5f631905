// Package fakemetal is a recording fake of Metal behind the mps.Messenger
// seam, so the Metal host code of a generated program runs on any OS. It
// simulates the objects (buffers with lengths and real memory, libraries,
// pipelines that know their kernel's buffer sizes from a registration,
// encoders with open and ended state, command buffers with commit and wait,
// autorelease pools, retain counts) and records every breach of the
// protocol mlbuild's programs promise to follow: each buffer bound is alive
// and large enough for the kernel's constant shape, each encoder is ended
// before commit, MPS encodes happen outside compute encoders, each command
// buffer (one training step) is committed once and waited for once, and
// nothing is released twice.
//
// GEMMs are computed for real on the buffers' memory when a command buffer
// is committed, and kernels may carry a Go function that simulates them, so
// tests can also check that data flows where the host code says it does.
package fakemetal

import (
	"fmt"
	"hash/fnv"
	"regexp"
	"sort"
	"strings"
	"sync"
	"unsafe"

	"github.com/mlbuild/mlbuild/mps"
)

// Kernel is what the fake knows of one generated kernel: enough to check
// every dispatch of it.
type Kernel struct {
	// Name is the kernel function's name in the Metal source.
	Name string
	// BufferBytes[i] is how many bytes the kernel reads or writes through
	// buffer argument i, from the bound offset, for its constant shape.
	BufferBytes []int
	// ConstantBytes is the size of the constants struct bound with setBytes
	// at index len(BufferBytes); 0 when the kernel takes none.
	ConstantBytes int
	// Run, when set, simulates the kernel at commit on the bound bytes
	// (buffers[i] starts at the bound offset and holds BufferBytes[i]).
	Run func(buffers [][]byte, constants []byte, grid, threadgroup mps.Size)
}

// Check names one rule of the protocol.
type Check string

// The rules the fake checks. Each Violation carries one of them.
const (
	CheckArguments         Check = "arguments"           // wrong number or type of message arguments
	CheckUnknownMessage    Check = "unknown-message"     // a selector the object does not answer
	CheckNilReceiver       Check = "nil-receiver"        // a message to nil or to no object
	CheckUseAfterRelease   Check = "use-after-release"   // a message to, or use of, a freed object
	CheckDoubleRelease     Check = "double-release"      // a release with no reference left
	CheckAutorelease       Check = "autorelease"         // an autoreleased object with no pool, or pools out of order
	CheckStorage           Check = "storage"             // a buffer not in shared storage
	CheckBufferAlive       Check = "buffer-alive"        // a dead buffer bound or used by MPS
	CheckBufferSize        Check = "buffer-size"         // offset + needed bytes > buffer length
	CheckBinding           Check = "binding"             // a kernel argument unbound, constants of the wrong size, no pipeline
	CheckThreadgroup       Check = "threadgroup"         // an empty or too large threadgroup or grid
	CheckEncoderEnded      Check = "encoder-ended"       // an encoder open at commit, ended twice, or used after ending
	CheckMPSOutsideEncoder Check = "mps-outside-encoder" // an MPS encode while a compute encoder is open
	CheckGemmShape         Check = "gemm-shape"          // matrices smaller than the GEMM's sizes
	CheckOneCommit         Check = "one-commit"          // a command buffer committed twice, or never, or steps overlapping
	CheckOneWait           Check = "one-wait"            // a wait before commit, twice, or never
	CheckInFlightWrite     Check = "in-flight-write"     // the CPU changed a buffer the GPU was using
)

// Violation is one breach of the protocol.
type Violation struct {
	Check  Check
	Detail string
}

// String prints the violation as "check: detail".
func (v Violation) String() string { return string(v.Check) + ": " + v.Detail }

// Stats counts what the host code did.
type Stats struct {
	CommandBuffers, Encoders, Dispatches, Gemms, Commits, Waits int
}

// maxThreadsPerThreadgroup is what the fake's pipelines report, as an
// Apple M1 does for simple kernels.
const maxThreadsPerThreadgroup = 1024

// Fake is a simulated Metal device and Objective-C runtime. It implements
// mps.Messenger; use it from one goroutine at a time (it locks anyway).
type Fake struct {
	mu         sync.Mutex
	kernels    map[string]Kernel
	noDevice   bool
	failCB     map[int]string
	selNames   []string
	selIDs     map[string]mps.SEL
	objects    map[mps.ID]*object
	nextID     mps.ID
	classes    map[string]mps.ID
	pools      []*object
	cbs        []*object
	violations []Violation
	log        []string
	stats      Stats
}

// New makes a fake device that knows the given kernels.
func New(kernels ...Kernel) *Fake {
	f := &Fake{
		kernels: map[string]Kernel{},
		failCB:  map[int]string{},
		selIDs:  map[string]mps.SEL{},
		objects: map[mps.ID]*object{},
		nextID:  0x1000,
		classes: map[string]mps.ID{},
	}
	for _, k := range kernels {
		f.kernels[k.Name] = k
	}
	return f
}

// RemoveDevice makes the fake a machine without a GPU: DefaultDevice fails.
func (f *Fake) RemoveDevice() { f.noDevice = true }

// FailCommandBuffer makes the n-th command buffer (from 1) fail on the GPU
// with message, as a kernel fault would.
func (f *Fake) FailCommandBuffer(n int, message string) { f.failCB[n] = message }

// Violations returns the breaches recorded so far.
func (f *Fake) Violations() []Violation {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Violation(nil), f.violations...)
}

// Check returns the recorded breaches plus those visible only at the end of
// a run (a command buffer never committed or waited for, a pool never
// drained) as one error, or nil.
func (f *Fake) Check() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	vs := append([]Violation(nil), f.violations...)
	for _, cb := range f.cbs {
		if cb.cb.commits == 0 {
			vs = append(vs, Violation{CheckOneCommit, fmt.Sprintf("%s (%q) was never committed", cb, cb.label)})
		} else if cb.cb.waits == 0 {
			vs = append(vs, Violation{CheckOneWait, fmt.Sprintf("%s (%q) was committed but never waited for", cb, cb.label)})
		}
	}
	for _, p := range f.pools {
		vs = append(vs, Violation{CheckAutorelease, fmt.Sprintf("%s was never drained", p)})
	}
	if len(vs) == 0 {
		return nil
	}
	lines := make([]string, len(vs))
	for i, v := range vs {
		lines[i] = v.String()
	}
	return fmt.Errorf("fakemetal: %d protocol violations:\n%s", len(vs), strings.Join(lines, "\n"))
}

// Leaks lists the objects still holding references, for a check after the
// host code has released everything it owns.
func (f *Fake) Leaks() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, o := range f.objects {
		if o.kind != kindClass && o.refs > 0 {
			out = append(out, fmt.Sprintf("%s with %d references", o, o.refs))
		}
	}
	sort.Strings(out)
	return out
}

// Stats returns the counts of what the host code did.
func (f *Fake) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

// Log returns every message sent, one "Receiver#id selector" line each.
func (f *Fake) Log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.log...)
}

// Object kinds: Metal protocols and Foundation/MPS classes.
const (
	kindClass          = "Class"
	kindDevice         = "MTLDevice"
	kindQueue          = "MTLCommandQueue"
	kindBuffer         = "MTLBuffer"
	kindLibrary        = "MTLLibrary"
	kindFunction       = "MTLFunction"
	kindPipeline       = "MTLComputePipelineState"
	kindCommandBuffer  = "MTLCommandBuffer"
	kindEncoder        = "MTLComputeCommandEncoder"
	kindString         = "NSString"
	kindError          = "NSError"
	kindPool           = "NSAutoreleasePool"
	kindMatrixDesc     = "MPSMatrixDescriptor"
	kindMatrix         = "MPSMatrix"
	kindMatrixMultiply = "MPSMatrixMultiplication"
)

// object is one simulated Objective-C object.
type object struct {
	id          mps.ID
	kind        string
	className   string // for kindClass
	refs        int
	dead        bool
	initialized bool
	label       string
	bytes       []byte // buffer memory, or NUL-terminated string bytes
	kernel      *Kernel
	kernelName  string
	source      string
	pooled      []*object // for pools
	cb          *cmdBuffer
	enc         *encoder
	desc        matrixDesc
	matrix      matrixData
	gemm        gemmParams
	retained    []*object // released when this object dies
}

func (o *object) String() string {
	if o == nil {
		return "nil"
	}
	if o.kind == kindClass {
		return o.className
	}
	return fmt.Sprintf("%s#%x", o.kind, uintptr(o.id))
}

type binding struct {
	buffer *object
	offset int
}

type encoder struct {
	cb       *object
	ended    bool
	pipeline *object
	buffers  map[int]binding
	bytes    map[int][]byte
}

type command struct {
	dispatch  bool
	kernel    *Kernel
	buffers   [][]byte
	constants []byte
	grid, tg  mps.Size
	gemm      *object
	a, b, c   *object
}

type cmdBuffer struct {
	index          int
	open           *object // the open encoder
	commits, waits int
	commands       []command
	used           map[*object]bool
	hashes         map[*object]uint64
	failed         string
	status         mps.CommandBufferStatus
	nsError        *object
}

type matrixDesc struct {
	rows, cols, rowBytes int
	dataType             uint
}

type matrixData struct {
	buffer *object
	offset int
	desc   matrixDesc
}

type gemmParams struct {
	transA, transB bool
	m, n, k        int
	alpha, beta    float64
}

func (f *Fake) violate(c Check, format string, args ...any) {
	f.violations = append(f.violations, Violation{c, fmt.Sprintf(format, args...)})
}

func (f *Fake) newObject(kind string) *object {
	f.nextID += 0x10
	o := &object{id: f.nextID, kind: kind, refs: 1, initialized: true}
	f.objects[o.id] = o
	return o
}

// autoreleased makes an object owned by the innermost autorelease pool.
func (f *Fake) autoreleased(kind string, what string) *object {
	o := f.newObject(kind)
	if len(f.pools) == 0 {
		f.violate(CheckAutorelease, "%s returned %s autoreleased with no autorelease pool: it leaks", what, o)
		return o
	}
	pool := f.pools[len(f.pools)-1]
	pool.pooled = append(pool.pooled, o)
	return o
}

func (f *Fake) newString(s string, what string) *object {
	o := f.autoreleased(kindString, what)
	o.bytes = append([]byte(s), 0)
	return o
}

func (f *Fake) newError(message string, what string) *object {
	o := f.autoreleased(kindError, what)
	o.label = message
	return o
}

func (f *Fake) release(o *object, by string) {
	if o.kind == kindClass {
		return
	}
	if o.refs <= 0 {
		f.violate(CheckDoubleRelease, "%s released by %s with no reference left", o, by)
		return
	}
	o.refs--
	if o.refs == 0 {
		o.dead = true
		for _, r := range o.retained {
			f.release(r, o.String()+" dealloc")
		}
		o.retained = nil
	}
}

// GetClass implements mps.Messenger for the classes mps uses.
func (f *Fake) GetClass(name string) mps.ID {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch name {
	case kindString, kindPool, kindMatrixDesc, kindMatrix, kindMatrixMultiply:
	default:
		return 0
	}
	if id, ok := f.classes[name]; ok {
		return id
	}
	o := f.newObject(kindClass)
	o.className = name
	f.classes[name] = o.id
	return o.id
}

// RegisterSelector implements mps.Messenger.
func (f *Fake) RegisterSelector(name string) mps.SEL {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.selIDs[name]; ok {
		return s
	}
	f.selNames = append(f.selNames, name)
	s := mps.SEL(len(f.selNames))
	f.selIDs[name] = s
	return s
}

// DefaultDevice implements mps.Messenger: a new device, or an error
// wrapping mps.ErrNoDevice after RemoveDevice.
func (f *Fake) DefaultDevice() (mps.ID, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.noDevice {
		return 0, fmt.Errorf("fakemetal: MTLCreateSystemDefaultDevice returned nil: %w", mps.ErrNoDevice)
	}
	return f.newObject(kindDevice).id, nil
}

// SendPointer implements mps.Messenger for contents and UTF8String.
func (f *Fake) SendPointer(receiver mps.ID, sel mps.SEL, args ...any) unsafe.Pointer {
	f.mu.Lock()
	defer f.mu.Unlock()
	o, name, ok := f.receive(receiver, sel, args)
	if !ok {
		return nil
	}
	switch {
	case o.kind == kindBuffer && name == "contents":
		return unsafe.Pointer(&o.bytes[0])
	case o.kind == kindString && name == "UTF8String":
		return unsafe.Pointer(&o.bytes[0])
	}
	f.violate(CheckUnknownMessage, "%s does not answer %s with a pointer", o, name)
	return nil
}

// receive logs a message and checks its receiver and argument count.
func (f *Fake) receive(receiver mps.ID, sel mps.SEL, args []any) (*object, string, bool) {
	name := fmt.Sprintf("sel(%d)", sel)
	if int(sel) >= 1 && int(sel) <= len(f.selNames) {
		name = f.selNames[sel-1]
	}
	o := f.objects[receiver]
	f.log = append(f.log, o.String()+" "+name)
	if o == nil {
		f.violate(CheckNilReceiver, "%s sent to %#x, which is no object", name, uintptr(receiver))
		return nil, name, false
	}
	if o.dead && name == "release" {
		f.violate(CheckDoubleRelease, "%s released again after it was freed", o)
		return nil, name, false
	}
	if o.dead {
		f.violate(CheckUseAfterRelease, "%s sent to %s after it was freed", name, o)
		return nil, name, false
	}
	if n := strings.Count(name, ":"); n != len(args) {
		f.violate(CheckArguments, "%s sent to %s with %d arguments, the selector takes %d", name, o, len(args), n)
		return nil, name, false
	}
	if o.kind != kindClass && !o.initialized && !strings.HasPrefix(name, "init") && name != "release" {
		f.violate(CheckUnknownMessage, "%s sent to %s before any init", name, o)
	}
	return o, name, true
}

// args decodes message arguments, recording a type mismatch.
type argReader struct {
	f    *Fake
	sel  string
	args []any
	bad  bool
}

func (r *argReader) fail(i int, want string) {
	if !r.bad {
		r.f.violate(CheckArguments, "%s: argument %d is %T, want %s", r.sel, i, r.args[i], want)
	}
	r.bad = true
}

func (r *argReader) id(i int) mps.ID {
	v, ok := r.args[i].(mps.ID)
	if !ok {
		r.fail(i, "mps.ID")
	}
	return v
}

func (r *argReader) uint(i int) int {
	v, ok := r.args[i].(uint)
	if !ok {
		r.fail(i, "uint")
	}
	return int(v)
}

func (r *argReader) bool(i int) bool {
	v, ok := r.args[i].(bool)
	if !ok {
		r.fail(i, "bool")
	}
	return v
}

func (r *argReader) float(i int) float64 {
	v, ok := r.args[i].(float64)
	if !ok {
		r.fail(i, "float64")
	}
	return v
}

func (r *argReader) size(i int) mps.Size {
	v, ok := r.args[i].(mps.Size)
	if !ok {
		r.fail(i, "mps.Size")
	}
	return v
}

func (r *argReader) pointer(i int) unsafe.Pointer {
	v, ok := r.args[i].(unsafe.Pointer)
	if !ok {
		r.fail(i, "unsafe.Pointer")
	}
	return v
}

// live returns the object id names if it exists, is alive and has kind;
// otherwise it records a violation of check and returns nil.
func (f *Fake) live(id mps.ID, kind string, check Check, what string) *object {
	o := f.objects[id]
	switch {
	case o == nil:
		f.violate(check, "%s: %#x is no %s", what, uintptr(id), kind)
		return nil
	case o.dead:
		f.violate(check, "%s: %s was already freed", what, o)
		return nil
	case o.kind != kind:
		f.violate(check, "%s: %s is not a %s", what, o, kind)
		return nil
	}
	return o
}

// Send implements mps.Messenger: it simulates the message and returns its
// one-word result.
func (f *Fake) Send(receiver mps.ID, sel mps.SEL, args ...any) uintptr {
	f.mu.Lock()
	defer f.mu.Unlock()
	o, name, ok := f.receive(receiver, sel, args)
	if !ok {
		return 0
	}
	r := &argReader{f: f, sel: name, args: args}
	switch name {
	case "retain":
		if o.kind != kindClass {
			o.refs++
		}
		return uintptr(o.id)
	case "release":
		f.release(o, "release")
		return 0
	}
	var res uintptr
	switch o.kind {
	case kindClass:
		res = f.classMessage(o, name, r)
	case kindDevice:
		res = f.deviceMessage(o, name, r)
	case kindQueue:
		res = f.queueMessage(o, name)
	case kindBuffer:
		res = f.bufferMessage(o, name, r)
	case kindLibrary:
		res = f.libraryMessage(o, name, r)
	case kindPipeline:
		res = f.pipelineMessage(o, name)
	case kindCommandBuffer:
		res = f.commandBufferMessage(o, name, r)
	case kindEncoder:
		res = f.encoderMessage(o, name, r)
	case kindString, kindError, kindPool, kindMatrix, kindMatrixMultiply:
		res = f.objectMessage(o, name, r)
	default:
		f.violate(CheckUnknownMessage, "%s does not answer %s", o, name)
	}
	return res
}

func (f *Fake) unknown(o *object, name string) uintptr {
	f.violate(CheckUnknownMessage, "%s does not answer %s", o, name)
	return 0
}

func (f *Fake) classMessage(o *object, name string, r *argReader) uintptr {
	switch {
	case name == "alloc" && o.className != kindPool:
		n := f.newObject(o.className)
		n.initialized = false
		return uintptr(n.id)
	case name == "new" && o.className == kindPool:
		p := f.newObject(kindPool)
		f.pools = append(f.pools, p)
		return uintptr(p.id)
	case name == "matrixDescriptorWithRows:columns:rowBytes:dataType:" && o.className == kindMatrixDesc:
		d := matrixDesc{rows: r.uint(0), cols: r.uint(1), rowBytes: r.uint(2), dataType: uint(r.uint(3))}
		if r.bad {
			return 0
		}
		if d.dataType != mps.DataTypeFloat32 {
			f.violate(CheckArguments, "%s: data type %#x, mlbuild's matrices are float32 (%#x)", name, d.dataType, mps.DataTypeFloat32)
		}
		if d.rows == 0 || d.cols == 0 || d.rowBytes < d.cols*4 {
			f.violate(CheckGemmShape, "%s: %dx%d matrix with %d row bytes", name, d.rows, d.cols, d.rowBytes)
		}
		desc := f.autoreleased(kindMatrixDesc, name)
		desc.desc = d
		return uintptr(desc.id)
	}
	return f.unknown(o, name)
}

func (f *Fake) deviceMessage(o *object, name string, r *argReader) uintptr {
	switch name {
	case "name":
		return uintptr(f.newString("Fake Apple GPU (mlbuild fakemetal)", name).id)
	case "newCommandQueue":
		return uintptr(f.newObject(kindQueue).id)
	case "newBufferWithLength:options:":
		length, options := r.uint(0), r.uint(1)
		if r.bad || length == 0 {
			return 0
		}
		if mps.ResourceOptions(options)&(0xf<<4) != mps.ResourceStorageModeShared {
			f.violate(CheckStorage, "%s: options %#x are not shared storage: the CPU could not write the buffer", name, options)
		}
		b := f.newObject(kindBuffer)
		b.bytes = make([]byte, length)
		return uintptr(b.id)
	case "newLibraryWithSource:options:error:":
		src, errOut := r.id(0), r.pointer(2)
		r.id(1)
		if r.bad {
			return 0
		}
		s := f.live(src, kindString, CheckArguments, name+" source")
		if s == nil {
			return 0
		}
		source := string(s.bytes[:len(s.bytes)-1])
		if m := regexp.MustCompile(`(?m)^\s*#error\s+(.*)$`).FindStringSubmatch(source); m != nil {
			e := f.newError("program_source: error: "+m[1], name)
			if errOut != nil {
				*(*mps.ID)(errOut) = e.id
			}
			return 0
		}
		lib := f.newObject(kindLibrary)
		lib.source = source
		return uintptr(lib.id)
	case "newComputePipelineStateWithFunction:error:":
		fn := f.live(r.id(0), kindFunction, CheckArguments, name)
		r.pointer(1)
		if fn == nil || r.bad {
			return 0
		}
		p := f.newObject(kindPipeline)
		p.kernel, p.kernelName = fn.kernel, fn.kernelName
		return uintptr(p.id)
	}
	return f.unknown(o, name)
}

func (f *Fake) queueMessage(o *object, name string) uintptr {
	if name != "commandBuffer" {
		return f.unknown(o, name)
	}
	for _, prev := range f.cbs {
		if prev.cb.waits == 0 {
			f.violate(CheckOneCommit, "a new command buffer while %s (%q) is not waited for: one step at a time", prev, prev.label)
		}
	}
	c := f.autoreleased(kindCommandBuffer, name)
	f.stats.CommandBuffers++
	c.cb = &cmdBuffer{index: f.stats.CommandBuffers, used: map[*object]bool{}}
	if msg, ok := f.failCB[c.cb.index]; ok {
		c.cb.failed = msg
	}
	f.cbs = append(f.cbs, c)
	return uintptr(c.id)
}

func (f *Fake) bufferMessage(o *object, name string, r *argReader) uintptr {
	switch name {
	case "length":
		return uintptr(len(o.bytes))
	case "setLabel:":
		if s := f.live(r.id(0), kindString, CheckArguments, name); s != nil {
			o.label = string(s.bytes[:len(s.bytes)-1])
		}
		return 0
	}
	return f.unknown(o, name)
}

// kernelPattern finds a kernel function definition by name in MSL source.
func kernelPattern(name string) *regexp.Regexp {
	return regexp.MustCompile(`\bkernel\s+void\s+` + regexp.QuoteMeta(name) + `\s*\(`)
}

func (f *Fake) libraryMessage(o *object, name string, r *argReader) uintptr {
	if name != "newFunctionWithName:" {
		return f.unknown(o, name)
	}
	s := f.live(r.id(0), kindString, CheckArguments, name)
	if s == nil {
		return 0
	}
	kname := string(s.bytes[:len(s.bytes)-1])
	if !kernelPattern(kname).MatchString(o.source) {
		return 0
	}
	fn := f.newObject(kindFunction)
	fn.kernelName = kname
	if k, ok := f.kernels[kname]; ok {
		fn.kernel = &k
	}
	return uintptr(fn.id)
}

func (f *Fake) pipelineMessage(o *object, name string) uintptr {
	switch name {
	case "maxTotalThreadsPerThreadgroup":
		return maxThreadsPerThreadgroup
	case "threadExecutionWidth":
		return 32
	}
	return f.unknown(o, name)
}

func (f *Fake) commandBufferMessage(o *object, name string, r *argReader) uintptr {
	cb := o.cb
	switch name {
	case "computeCommandEncoder":
		if cb.commits > 0 {
			f.violate(CheckOneCommit, "%s: a compute encoder on %s after commit", name, o)
		}
		if cb.open != nil {
			f.violate(CheckEncoderEnded, "%s: a new compute encoder on %s while %s is not ended", name, o, cb.open)
		}
		e := f.autoreleased(kindEncoder, name)
		e.enc = &encoder{cb: o, buffers: map[int]binding{}, bytes: map[int][]byte{}}
		cb.open = e
		f.stats.Encoders++
		return uintptr(e.id)
	case "commit":
		if cb.open != nil {
			f.violate(CheckEncoderEnded, "%s (%q) committed while %s is not ended", o, o.label, cb.open)
		}
		cb.commits++
		f.stats.Commits++
		if cb.commits > 1 {
			f.violate(CheckOneCommit, "%s (%q) committed %d times", o, o.label, cb.commits)
			return 0
		}
		f.execute(o)
		return 0
	case "waitUntilCompleted":
		cb.waits++
		f.stats.Waits++
		switch {
		case cb.commits == 0:
			f.violate(CheckOneWait, "%s (%q) waited for before commit: it would block forever", o, o.label)
		case cb.waits > 1:
			f.violate(CheckOneWait, "%s (%q) waited for %d times", o, o.label, cb.waits)
		default:
			for buf, h := range cb.hashes {
				if hashBytes(buf.bytes) != h {
					f.violate(CheckInFlightWrite, "the CPU wrote %s (%q) while %s (%q) was using it on the GPU", buf, buf.label, o, o.label)
				}
			}
			if cb.failed != "" {
				cb.status = mps.CommandBufferStatusError
			} else {
				cb.status = mps.CommandBufferStatusCompleted
			}
		}
		return 0
	case "status":
		return uintptr(cb.status)
	case "error":
		if cb.failed == "" || cb.status != mps.CommandBufferStatusError {
			return 0
		}
		if cb.nsError == nil || cb.nsError.dead {
			cb.nsError = f.newError(cb.failed, name)
		}
		return uintptr(cb.nsError.id)
	case "setLabel:":
		if s := f.live(r.id(0), kindString, CheckArguments, name); s != nil {
			o.label = string(s.bytes[:len(s.bytes)-1])
		}
		return 0
	}
	return f.unknown(o, name)
}

func (f *Fake) encoderMessage(o *object, name string, r *argReader) uintptr {
	e := o.enc
	if e.ended {
		f.violate(CheckEncoderEnded, "%s sent to %s after endEncoding", name, o)
		return 0
	}
	switch name {
	case "endEncoding":
		e.ended = true
		e.cb.cb.open = nil
		return 0
	case "setComputePipelineState:":
		e.pipeline = f.live(r.id(0), kindPipeline, CheckBinding, name)
		return 0
	case "setBuffer:offset:atIndex:":
		id, offset, index := r.id(0), r.uint(1), r.uint(2)
		if r.bad {
			return 0
		}
		buf := f.live(id, kindBuffer, CheckBufferAlive, fmt.Sprintf("%s index %d", name, index))
		if buf == nil {
			delete(e.buffers, index)
			return 0
		}
		e.buffers[index] = binding{buffer: buf, offset: offset}
		return 0
	case "setBytes:length:atIndex:":
		p, n, index := r.pointer(0), r.uint(1), r.uint(2)
		if r.bad || p == nil {
			return 0
		}
		e.bytes[index] = append([]byte(nil), unsafe.Slice((*byte)(p), n)...)
		return 0
	case "dispatchThreads:threadsPerThreadgroup:", "dispatchThreadgroups:threadsPerThreadgroup:":
		grid, tg := r.size(0), r.size(1)
		if r.bad {
			return 0
		}
		f.dispatch(e, name, grid, tg)
		return 0
	}
	return f.unknown(o, name)
}

// dispatch checks one kernel launch against the kernel's registration and
// records it for execution at commit.
func (f *Fake) dispatch(e *encoder, name string, grid, tg mps.Size) {
	f.stats.Dispatches++
	p := e.pipeline
	if p == nil || p.dead {
		f.violate(CheckBinding, "%s with no live compute pipeline set", name)
		return
	}
	k := p.kernel
	if k == nil {
		f.violate(CheckBinding, "kernel %q has no registration in the fake: its buffer sizes cannot be checked", p.kernelName)
		return
	}
	if n := tg.Width * tg.Height * tg.Depth; n == 0 || n > maxThreadsPerThreadgroup {
		f.violate(CheckThreadgroup, "kernel %q: threadgroup %dx%dx%d, want 1 to %d threads", k.Name, tg.Width, tg.Height, tg.Depth, maxThreadsPerThreadgroup)
	}
	if grid.Width*grid.Height*grid.Depth == 0 {
		f.violate(CheckThreadgroup, "kernel %q: empty grid", k.Name)
	}
	cmd := command{dispatch: true, kernel: k, grid: grid, tg: tg}
	ok := true
	for i, need := range k.BufferBytes {
		bnd, bound := e.buffers[i]
		switch {
		case !bound:
			f.violate(CheckBinding, "kernel %q: buffer argument %d is not bound", k.Name, i)
			ok = false
		case bnd.buffer.dead:
			f.violate(CheckBufferAlive, "kernel %q: buffer argument %d, %s (%q), was freed after binding", k.Name, i, bnd.buffer, bnd.buffer.label)
			ok = false
		case bnd.offset+need > len(bnd.buffer.bytes):
			f.violate(CheckBufferSize, "kernel %q: buffer argument %d, %s (%q): offset %d + %d bytes needed > length %d", k.Name, i, bnd.buffer, bnd.buffer.label, bnd.offset, need, len(bnd.buffer.bytes))
			ok = false
		default:
			cmd.buffers = append(cmd.buffers, bnd.buffer.bytes[bnd.offset:bnd.offset+need])
			e.cb.cb.used[bnd.buffer] = true
		}
	}
	if k.ConstantBytes > 0 {
		c, bound := e.bytes[len(k.BufferBytes)]
		if !bound || len(c) != k.ConstantBytes {
			f.violate(CheckBinding, "kernel %q: constants at index %d are %d bytes, want %d", k.Name, len(k.BufferBytes), len(c), k.ConstantBytes)
			ok = false
		}
		cmd.constants = c
	}
	if ok {
		e.cb.cb.commands = append(e.cb.cb.commands, cmd)
	}
}

func (f *Fake) objectMessage(o *object, name string, r *argReader) uintptr {
	switch {
	case o.kind == kindString && name == "initWithBytes:length:encoding:":
		p, n, enc := r.pointer(0), r.uint(1), r.uint(2)
		if r.bad {
			return 0
		}
		if enc != 4 {
			f.violate(CheckArguments, "%s: encoding %d, want NSUTF8StringEncoding (4)", name, enc)
		}
		o.bytes = make([]byte, n+1)
		if n > 0 {
			copy(o.bytes, unsafe.Slice((*byte)(p), n))
		}
		o.initialized = true
		return uintptr(o.id)
	case o.kind == kindError && name == "localizedDescription":
		return uintptr(f.newString(o.label, name).id)
	case o.kind == kindPool && name == "drain":
		if len(f.pools) == 0 || f.pools[len(f.pools)-1] != o {
			f.violate(CheckAutorelease, "%s drained while it is not the innermost pool", o)
		}
		for i, p := range f.pools {
			if p == o {
				f.pools = append(f.pools[:i], f.pools[i+1:]...)
				break
			}
		}
		for _, x := range o.pooled {
			f.release(x, o.String()+" drain")
		}
		o.pooled = nil
		f.release(o, "drain")
		return 0
	case o.kind == kindMatrix && name == "initWithBuffer:offset:descriptor:":
		bufID, offset, descID := r.id(0), r.uint(1), r.id(2)
		if r.bad {
			return 0
		}
		buf := f.live(bufID, kindBuffer, CheckBufferAlive, name)
		desc := f.live(descID, kindMatrixDesc, CheckArguments, name)
		if buf == nil || desc == nil {
			return 0
		}
		d := desc.desc
		if end := offset + (d.rows-1)*d.rowBytes + d.cols*4; end > len(buf.bytes) {
			f.violate(CheckBufferSize, "%s: %dx%d matrix at offset %d with row bytes %d ends at byte %d of %s (%q), length %d", name, d.rows, d.cols, offset, d.rowBytes, end, buf, buf.label, len(buf.bytes))
		}
		buf.refs++
		o.retained = append(o.retained, buf)
		o.matrix = matrixData{buffer: buf, offset: offset, desc: d}
		o.initialized = true
		return uintptr(o.id)
	case o.kind == kindMatrixMultiply && name == "initWithDevice:transposeLeft:transposeRight:resultRows:resultColumns:interiorColumns:alpha:beta:":
		f.live(r.id(0), kindDevice, CheckArguments, name)
		o.gemm = gemmParams{transA: r.bool(1), transB: r.bool(2), m: r.uint(3), n: r.uint(4), k: r.uint(5), alpha: r.float(6), beta: r.float(7)}
		if r.bad {
			return 0
		}
		o.initialized = true
		return uintptr(o.id)
	case o.kind == kindMatrixMultiply && name == "encodeToCommandBuffer:leftMatrix:rightMatrix:resultMatrix:":
		f.encodeGemm(o, name, r)
		return 0
	}
	return f.unknown(o, name)
}

// encodeGemm checks an MPS GEMM encode and records it for execution.
func (f *Fake) encodeGemm(o *object, name string, r *argReader) {
	f.stats.Gemms++
	cbID, aID, bID, cID := r.id(0), r.id(1), r.id(2), r.id(3)
	if r.bad {
		return
	}
	cbo := f.live(cbID, kindCommandBuffer, CheckArguments, name)
	if cbo == nil {
		return
	}
	if cbo.cb.open != nil {
		f.violate(CheckMPSOutsideEncoder, "MPS GEMM encoded on %s (%q) while compute encoder %s is open", cbo, cbo.label, cbo.cb.open)
	}
	if cbo.cb.commits > 0 {
		f.violate(CheckOneCommit, "MPS GEMM encoded on %s (%q) after commit", cbo, cbo.label)
	}
	var ms [3]*object
	for i, id := range []mps.ID{aID, bID, cID} {
		m := f.live(id, kindMatrix, CheckBufferAlive, fmt.Sprintf("%s matrix %c", name, "ABC"[i]))
		if m == nil {
			return
		}
		if m.matrix.buffer.dead {
			f.violate(CheckBufferAlive, "%s matrix %c: its buffer %s was freed", name, "ABC"[i], m.matrix.buffer)
			return
		}
		ms[i] = m
	}
	g := o.gemm
	aRows, aCols := g.m, g.k
	if g.transA {
		aRows, aCols = g.k, g.m
	}
	bRows, bCols := g.k, g.n
	if g.transB {
		bRows, bCols = g.n, g.k
	}
	need := [3][2]int{{aRows, aCols}, {bRows, bCols}, {g.m, g.n}}
	for i, m := range ms {
		if d := m.matrix.desc; d.rows < need[i][0] || d.cols < need[i][1] {
			f.violate(CheckGemmShape, "GEMM %dx%dx%d (transpose %v,%v): matrix %c is %dx%d, needs at least %dx%d", g.m, g.n, g.k, g.transA, g.transB, "ABC"[i], d.rows, d.cols, need[i][0], need[i][1])
			return
		}
		cbo.cb.used[m.matrix.buffer] = true
	}
	cbo.cb.commands = append(cbo.cb.commands, command{gemm: o, a: ms[0], b: ms[1], c: ms[2]})
}

// execute runs a committed command buffer's work in order, then remembers
// a hash of every buffer it used so a CPU write before the wait shows.
func (f *Fake) execute(o *object) {
	cb := o.cb
	cb.status = mps.CommandBufferStatusCommitted
	if cb.failed == "" {
		for _, c := range cb.commands {
			if c.dispatch {
				if c.kernel.Run != nil {
					c.kernel.Run(c.buffers, c.constants, c.grid, c.tg)
				}
				continue
			}
			runGemm(c.gemm.gemm, c.a.matrix, c.b.matrix, c.c.matrix)
		}
	}
	cb.hashes = map[*object]uint64{}
	for buf := range cb.used {
		cb.hashes[buf] = hashBytes(buf.bytes)
	}
}

// at returns element (i, j) of a matrix as a pointer into its buffer.
func at(m matrixData, i, j int) *float32 {
	return (*float32)(unsafe.Pointer(&m.buffer.bytes[m.offset+i*m.desc.rowBytes+j*4]))
}

// runGemm computes C = alpha·op(A)·op(B) + beta·C as MPS defines it.
func runGemm(g gemmParams, a, b, c matrixData) {
	for i := 0; i < g.m; i++ {
		for j := 0; j < g.n; j++ {
			var sum float64
			for p := 0; p < g.k; p++ {
				var av, bv *float32
				if g.transA {
					av = at(a, p, i)
				} else {
					av = at(a, i, p)
				}
				if g.transB {
					bv = at(b, j, p)
				} else {
					bv = at(b, p, j)
				}
				sum += float64(*av) * float64(*bv)
			}
			cv := at(c, i, j)
			if g.beta == 0 {
				*cv = float32(g.alpha * sum)
			} else {
				*cv = float32(g.alpha*sum + g.beta*float64(*cv))
			}
		}
	}
}

func hashBytes(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}
