package mps

import (
	"fmt"
	"unsafe"
)

// ResourceOptions is MTLResourceOptions: storage and CPU cache mode of a
// buffer.
type ResourceOptions uint

// ResourceStorageModeShared keeps a buffer in memory that the CPU and the
// GPU share (unified memory on Apple silicon): the CPU writes it through
// Contents with no copy. It is the only storage mode this package uses.
const ResourceStorageModeShared ResourceOptions = 0 << 4

// CommandBufferStatus is MTLCommandBufferStatus.
type CommandBufferStatus uint

// Command buffer states, in the order a command buffer goes through them.
const (
	CommandBufferStatusNotEnqueued CommandBufferStatus = 0
	CommandBufferStatusEnqueued    CommandBufferStatus = 1
	CommandBufferStatusCommitted   CommandBufferStatus = 2
	CommandBufferStatusScheduled   CommandBufferStatus = 3
	CommandBufferStatusCompleted   CommandBufferStatus = 4
	CommandBufferStatusError       CommandBufferStatus = 5
)

// String names the status as Metal's documentation does.
func (s CommandBufferStatus) String() string {
	names := [...]string{"notEnqueued", "enqueued", "committed", "scheduled", "completed", "error"}
	if int(s) < len(names) {
		return names[s]
	}
	return fmt.Sprintf("status(%d)", uint(s))
}

// Device is an id<MTLDevice>: the GPU.
type Device struct {
	b  *bridge
	id ID
}

// CreateSystemDefaultDevice returns the system's default GPU through m.
// Without one the error wraps ErrNoDevice.
// https://developer.apple.com/documentation/metal/1433401-mtlcreatesystemdefaultdevice?language=objc
func CreateSystemDefaultDevice(m Messenger) (Device, error) {
	b, err := newBridge(m)
	if err != nil {
		return Device{}, err
	}
	id, err := m.DefaultDevice()
	if err != nil {
		return Device{}, err
	}
	if id == 0 {
		return Device{}, fmt.Errorf("mps: MTLCreateSystemDefaultDevice returned nil: %w", ErrNoDevice)
	}
	return Device{b: b, id: id}, nil
}

// Name is the GPU's name, such as "Apple M1 Pro". The NSString behind it
// is autoreleased: call it inside an autorelease pool.
// https://developer.apple.com/documentation/metal/mtldevice/1433359-name?language=objc
func (d Device) Name() string {
	return d.b.goString(ID(d.b.send(d.id, selName)))
}

// NewCommandQueue makes the queue that command buffers are taken from.
// https://developer.apple.com/documentation/metal/mtldevice/1433388-newcommandqueue?language=objc
func (d Device) NewCommandQueue() CommandQueue {
	return CommandQueue{b: d.b, id: ID(d.b.send(d.id, selNewCommandQueue))}
}

// NewBufferWithLength allocates length bytes of GPU memory; nil (a Buffer
// whose IsNil is true) when Metal cannot.
// https://developer.apple.com/documentation/metal/mtldevice/1433375-newbufferwithlength?language=objc
func (d Device) NewBufferWithLength(length uint, options ResourceOptions) Buffer {
	return Buffer{b: d.b, id: ID(d.b.send(d.id, selNewBufferWithLengthOptions, length, uint(options)))}
}

// NewLibraryWithSource compiles Metal Shading Language source at run time
// (Apple's offline compiler does not run on Linux, where programs are
// built). A compile error becomes a Go error carrying Metal's message.
// https://developer.apple.com/documentation/metal/mtldevice/1433431-newlibrarywithsource?language=objc
func (d Device) NewLibraryWithSource(source string) (Library, error) {
	src := d.b.newNSString(source)
	defer d.b.release(src)
	var nsErr ID
	id := ID(d.b.send(d.id, selNewLibraryWithSourceOptionsError, src, ID(0), unsafe.Pointer(&nsErr)))
	if id == 0 {
		return Library{}, d.b.nsError(nsErr, "compiling the Metal kernels")
	}
	return Library{b: d.b, id: id}, nil
}

// NewComputePipelineStateWithFunction makes the GPU program for a kernel
// function; slow, so callers cache it for the run.
// https://developer.apple.com/documentation/metal/mtldevice/1433395-newcomputepipelinestatewithfunct?language=objc
func (d Device) NewComputePipelineStateWithFunction(f Function) (ComputePipelineState, error) {
	var nsErr ID
	id := ID(d.b.send(d.id, selNewComputePipelineStateWithFunction, f.id, unsafe.Pointer(&nsErr)))
	if id == 0 {
		return ComputePipelineState{}, d.b.nsError(nsErr, "making the compute pipeline")
	}
	return ComputePipelineState{b: d.b, id: id}, nil
}

// Release gives back the reference that CreateSystemDefaultDevice returned.
func (d Device) Release() { d.b.release(d.id) }

// CommandQueue is an id<MTLCommandQueue>.
type CommandQueue struct {
	b  *bridge
	id ID
}

// CommandBuffer returns a new, autoreleased command buffer: it lives until
// the enclosing autorelease pool drains.
// https://developer.apple.com/documentation/metal/mtlcommandqueue/1508686-commandbuffer?language=objc
func (q CommandQueue) CommandBuffer() CommandBuffer {
	return CommandBuffer{b: q.b, id: ID(q.b.send(q.id, selCommandBuffer))}
}

// Release gives back the queue's reference.
func (q CommandQueue) Release() { q.b.release(q.id) }

// Buffer is an id<MTLBuffer> in shared storage.
type Buffer struct {
	b  *bridge
	id ID
}

// IsNil reports whether Metal returned no buffer.
func (buf Buffer) IsNil() bool { return buf.id == 0 }

// ID is the buffer's object pointer; it identifies the buffer in caches
// and messages.
func (buf Buffer) ID() ID { return buf.id }

// Contents is the CPU address of a shared buffer's bytes.
// https://developer.apple.com/documentation/metal/mtlbuffer/1515716-contents?language=objc
func (buf Buffer) Contents() unsafe.Pointer {
	return buf.b.sendPointer(buf.id, selContents)
}

// Length is the buffer's size in bytes.
// https://developer.apple.com/documentation/metal/mtlbuffer/1515373-length?language=objc
func (buf Buffer) Length() uint {
	return uint(buf.b.send(buf.id, selLength))
}

// Float32s views the buffer's shared memory as float32s: writes through the
// slice are what the GPU reads, with no copy. The slice is valid until the
// buffer is released.
func (buf Buffer) Float32s() []float32 {
	n := buf.Length() / 4
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(buf.Contents()), n)
}

// SetLabel names the buffer in Xcode's GPU captures and Metal's messages.
// https://developer.apple.com/documentation/metal/mtlresource/1515814-label?language=objc
func (buf Buffer) SetLabel(label string) {
	s := buf.b.newNSString(label)
	buf.b.send(buf.id, selResourceSetLabel, s)
	buf.b.release(s)
}

// Retain takes another reference to the buffer.
func (buf Buffer) Retain() { buf.b.retain(buf.id) }

// Release gives back one reference; the last one frees the memory.
func (buf Buffer) Release() { buf.b.release(buf.id) }

// Library is an id<MTLLibrary>: compiled kernels.
type Library struct {
	b  *bridge
	id ID
}

// NewFunctionWithName returns the kernel function called name; false when
// the library has none.
// https://developer.apple.com/documentation/metal/mtllibrary/1515524-newfunctionwithname?language=objc
func (l Library) NewFunctionWithName(name string) (Function, bool) {
	s := l.b.newNSString(name)
	defer l.b.release(s)
	id := ID(l.b.send(l.id, selNewFunctionWithName, s))
	return Function{b: l.b, id: id}, id != 0
}

// Release gives back the library's reference.
func (l Library) Release() { l.b.release(l.id) }

// Function is an id<MTLFunction>: one kernel of a library.
type Function struct {
	b  *bridge
	id ID
}

// Release gives back the function's reference.
func (f Function) Release() { f.b.release(f.id) }

// ComputePipelineState is an id<MTLComputePipelineState>: a kernel ready to
// dispatch.
type ComputePipelineState struct {
	b  *bridge
	id ID
}

// MaxTotalThreadsPerThreadgroup is the largest threadgroup this pipeline
// can run with.
// https://developer.apple.com/documentation/metal/mtlcomputepipelinestate/1414927-maxtotalthreadsperthreadgroup?language=objc
func (p ComputePipelineState) MaxTotalThreadsPerThreadgroup() uint {
	return uint(p.b.send(p.id, selMaxTotalThreadsPerThreadgroup))
}

// ThreadExecutionWidth is the SIMD width: threadgroup sizes should be a
// multiple of it.
// https://developer.apple.com/documentation/metal/mtlcomputepipelinestate/1414911-threadexecutionwidth?language=objc
func (p ComputePipelineState) ThreadExecutionWidth() uint {
	return uint(p.b.send(p.id, selThreadExecutionWidth))
}

// Release gives back the pipeline's reference.
func (p ComputePipelineState) Release() { p.b.release(p.id) }

// CommandBuffer is an id<MTLCommandBuffer>: the work of one training step.
type CommandBuffer struct {
	b  *bridge
	id ID
}

// ComputeCommandEncoder opens an (autoreleased) encoder for kernel
// dispatches; it must be ended before anything else is encoded.
// https://developer.apple.com/documentation/metal/mtlcommandbuffer/1443044-computecommandencoder?language=objc
func (c CommandBuffer) ComputeCommandEncoder() ComputeCommandEncoder {
	return ComputeCommandEncoder{b: c.b, id: ID(c.b.send(c.id, selComputeCommandEncoder))}
}

// Commit sends the command buffer to the GPU.
// https://developer.apple.com/documentation/metal/mtlcommandbuffer/1443003-commit?language=objc
func (c CommandBuffer) Commit() { c.b.send(c.id, selCommit) }

// WaitUntilCompleted blocks until the GPU has run the command buffer.
// https://developer.apple.com/documentation/metal/mtlcommandbuffer/1443039-waituntilcompleted?language=objc
func (c CommandBuffer) WaitUntilCompleted() { c.b.send(c.id, selWaitUntilCompleted) }

// Status is where the command buffer is in its life.
// https://developer.apple.com/documentation/metal/mtlcommandbuffer/1443048-status?language=objc
func (c CommandBuffer) Status() CommandBufferStatus {
	return CommandBufferStatus(c.b.send(c.id, selStatus))
}

// Error is the command buffer's failure as a Go error prefixed by context,
// or nil when it has none.
// https://developer.apple.com/documentation/metal/mtlcommandbuffer/1443040-error?language=objc
func (c CommandBuffer) Error(context string) error {
	id := ID(c.b.send(c.id, selError))
	if id == 0 {
		return nil
	}
	return c.b.nsError(id, context)
}

// SetLabel names the command buffer in GPU captures and error messages.
// https://developer.apple.com/documentation/metal/mtlcommandbuffer/1443031-label?language=objc
func (c CommandBuffer) SetLabel(label string) {
	s := c.b.newNSString(label)
	c.b.send(c.id, selCommandBufferSetLabel, s)
	c.b.release(s)
}

// ComputeCommandEncoder is an id<MTLComputeCommandEncoder>.
type ComputeCommandEncoder struct {
	b  *bridge
	id ID
}

// SetComputePipelineState selects the kernel that the next dispatches run.
// https://developer.apple.com/documentation/metal/mtlcomputecommandencoder/1443140-setcomputepipelinestate?language=objc
func (e ComputeCommandEncoder) SetComputePipelineState(p ComputePipelineState) {
	e.b.send(e.id, selSetComputePipelineState, p.id)
}

// SetBuffer binds buf, from byte offset on, to the kernel's buffer argument
// at index.
// https://developer.apple.com/documentation/metal/mtlcomputecommandencoder/1443126-setbuffer?language=objc
func (e ComputeCommandEncoder) SetBuffer(buf Buffer, offset, index uint) {
	e.b.send(e.id, selSetBufferOffsetAtIndex, buf.id, offset, index)
}

// SetBytes copies data (at most 4 KiB) into the command stream as the
// kernel's argument at index; the kernels' constants go this way.
// https://developer.apple.com/documentation/metal/mtlcomputecommandencoder/1443159-setbytes?language=objc
func (e ComputeCommandEncoder) SetBytes(data []byte, index uint) {
	if len(data) == 0 {
		return
	}
	e.b.send(e.id, selSetBytesLengthAtIndex, unsafe.Pointer(&data[0]), uint(len(data)), index)
}

// DispatchThreads runs grid threads in threadgroups of the given size; the
// last groups may be partial (Apple GPU family 4 and later: every M-series).
// https://developer.apple.com/documentation/metal/mtlcomputecommandencoder/2866532-dispatchthreads?language=objc
func (e ComputeCommandEncoder) DispatchThreads(grid, threadgroup Size) {
	e.b.send(e.id, selDispatchThreadsThreadsPerThreadgroup, grid, threadgroup)
}

// DispatchThreadgroups runs groups whole threadgroups of the given size.
// https://developer.apple.com/documentation/metal/mtlcomputecommandencoder/1443138-dispatchthreadgroups?language=objc
func (e ComputeCommandEncoder) DispatchThreadgroups(groups, threadgroup Size) {
	e.b.send(e.id, selDispatchThreadgroupsThreadsPerGroup, groups, threadgroup)
}

// EndEncoding closes the encoder; the command buffer accepts other work
// (MPS, commit) only after it.
// https://developer.apple.com/documentation/metal/mtlcommandencoder/1458038-endencoding?language=objc
func (e ComputeCommandEncoder) EndEncoding() { e.b.send(e.id, selEndEncoding) }
