package cuda

import "unsafe"

// The C types of the three libraries, as Go types of the same size. Handles
// are opaque pointers (uintptr); CUdevice is an int; CUdeviceptr is 64 bits
// on every platform this package supports.
type (
	// Result is a driver API status (CUresult); 0 is CUDA_SUCCESS.
	Result int32
	// DeviceHandle is a CUdevice, the driver's handle of one GPU.
	DeviceHandle int32
	// DevicePtr is a CUdeviceptr, an address in the GPU's memory.
	DevicePtr uint64
	// Context is a CUcontext.
	Context uintptr
	// Module is a CUmodule, a loaded PTX or CUBIN image.
	Module uintptr
	// Function is a CUfunction, one kernel of a module.
	Function uintptr
	// Stream is a CUstream.
	Stream uintptr
	// Graph is a CUgraph, the result of a stream capture.
	Graph uintptr
	// GraphExec is a CUgraphExec, an instantiated graph ready to launch.
	GraphExec uintptr
	// Event is a CUevent, a point in a stream that another stream can wait
	// for.
	Event uintptr

	// NVRTCResult is an NVRTC status (nvrtcResult); 0 is NVRTC_SUCCESS.
	NVRTCResult int32
	// Program is an nvrtcProgram.
	Program uintptr

	// BLASStatus is a cuBLAS status (cublasStatus_t); 0 is success.
	BLASStatus int32
	// BLASHandle is a cublasHandle_t.
	BLASHandle uintptr
	// Operation is a cublasOperation_t.
	Operation int32
)

// Values of the C enums this package passes or checks.
const (
	Success Result = 0

	ErrorInvalidValue                Result = 1
	ErrorOutOfMemory                 Result = 2
	ErrorNotInitialized              Result = 3
	ErrorInsufficientDriver          Result = 35
	ErrorNoDevice                    Result = 100
	ErrorInvalidDevice               Result = 101
	ErrorInvalidImage                Result = 200
	ErrorInvalidContext              Result = 201
	ErrorNoBinaryForGPU              Result = 209
	ErrorInvalidHandle               Result = 400
	ErrorNotFound                    Result = 500
	ErrorNotReady                    Result = 600
	ErrorIllegalAddress              Result = 700
	ErrorLaunchFailed                Result = 719
	ErrorHostMemoryAlreadyRegistered Result = 712
	ErrorHostMemoryNotRegistered     Result = 713
	ErrorStreamCaptureUnsup          Result = 900
	ErrorStreamCaptureInvalid        Result = 901
	ErrorUnknown                     Result = 999

	// CUdevice_attribute values.
	AttrComputeCapabilityMajor int32 = 75
	AttrComputeCapabilityMinor int32 = 76

	// CUstreamCaptureMode values. ThreadLocal forbids unsafe calls (an
	// allocation, a synchronous copy) from this thread while it captures.
	CaptureModeGlobal      int32 = 0
	CaptureModeThreadLocal int32 = 1
	CaptureModeRelaxed     int32 = 2

	// EventDisableTiming (CU_EVENT_DISABLE_TIMING) makes an event that
	// only orders streams, the cheapest kind; EventDefault
	// (CU_EVENT_DEFAULT) one that also takes the GPU's time when the
	// stream reaches it (EventElapsedTime).
	EventDefault       uint32 = 0
	EventDisableTiming uint32 = 2

	NVRTCSuccess          NVRTCResult = 0
	NVRTCErrorCompilation NVRTCResult = 6

	BLASSuccess        BLASStatus = 0
	BLASNotInitialized BLASStatus = 1
	BLASInvalidValue   BLASStatus = 7
	BLASExecFailed     BLASStatus = 13

	OpN Operation = 0 // CUBLAS_OP_N
	OpT Operation = 1 // CUBLAS_OP_T

	// cublasMath_t values.
	BLASDefaultMath      int32 = 0
	BLASTF32TensorOpMath int32 = 3
	BLASPedanticMath     int32 = 2

	// DataR32F is cudaDataType_t's CUDA_R_32F: float32 matrices (C of
	// every GemmEx this package calls, and A and B unless bfloat16).
	// DataR16BF is CUDA_R_16BF: bfloat16 A and B (Operand.Elem ElemBF16).
	DataR32F  int32 = 0
	DataR16BF int32 = 14

	// cublasComputeType_t values: the arithmetic of a GemmEx.
	// ComputeFast16BF and ComputeFastTF32 let cuBLAS round the float32
	// inputs to bfloat16 or TF32 for the tensor cores and accumulate in
	// float32.
	Compute32F      int32 = 68 // CUBLAS_COMPUTE_32F
	ComputeFast16BF int32 = 75 // CUBLAS_COMPUTE_32F_FAST_16BF
	ComputeFastTF32 int32 = 77 // CUBLAS_COMPUTE_32F_FAST_TF32

	// GemmDefault is cublasGemmAlgo_t's CUBLAS_GEMM_DEFAULT: cuBLAS's
	// heuristics choose the kernel.
	GemmDefault int32 = -1
)

// DriverAPI is every function of the CUDA driver API (libcuda.so.1) this
// package calls, one field each. The sym tag is the exported C symbol
// (the versioned _v2 names that cuda.h maps the plain names to); optional
// symbols may be missing from older libraries and are left nil. Reference:
// https://docs.nvidia.com/cuda/cuda-driver-api/
type DriverAPI struct {
	Init               func(flags uint32) Result                               `sym:"cuInit"`
	DriverGetVersion   func(version *int32) Result                             `sym:"cuDriverGetVersion"`
	GetErrorName       func(r Result, name **byte) Result                      `sym:"cuGetErrorName"`
	GetErrorString     func(r Result, message **byte) Result                   `sym:"cuGetErrorString"`
	DeviceGetCount     func(count *int32) Result                               `sym:"cuDeviceGetCount"`
	DeviceGet          func(dev *DeviceHandle, ordinal int32) Result           `sym:"cuDeviceGet"`
	DeviceGetName      func(name *byte, length int32, dev DeviceHandle) Result `sym:"cuDeviceGetName"`
	DeviceGetAttribute func(value *int32, attr int32, dev DeviceHandle) Result `sym:"cuDeviceGetAttribute"`
	DeviceTotalMem     func(bytes *uintptr, dev DeviceHandle) Result           `sym:"cuDeviceTotalMem_v2"`
	// DeviceCanAccessPeer and DeviceGetP2PAttribute describe the link
	// between two GPUs, for info (peers.go).
	DeviceCanAccessPeer     func(can *int32, dev, peer DeviceHandle) Result              `sym:"cuDeviceCanAccessPeer" optional:"true"`
	DeviceGetP2PAttribute   func(value *int32, attr int32, src, dst DeviceHandle) Result `sym:"cuDeviceGetP2PAttribute" optional:"true"`
	DevicePrimaryCtxRetain  func(ctx *Context, dev DeviceHandle) Result                  `sym:"cuDevicePrimaryCtxRetain"`
	DevicePrimaryCtxRelease func(dev DeviceHandle) Result                                `sym:"cuDevicePrimaryCtxRelease_v2"`
	CtxSetCurrent           func(ctx Context) Result                                     `sym:"cuCtxSetCurrent"`
	MemGetInfo              func(free, total *uintptr) Result                            `sym:"cuMemGetInfo_v2"`
	MemAlloc                func(ptr *DevicePtr, bytes uintptr) Result                   `sym:"cuMemAlloc_v2"`
	MemFree                 func(ptr DevicePtr) Result                                   `sym:"cuMemFree_v2"`
	MemsetD8                func(dst DevicePtr, value uint8, n uintptr) Result           `sym:"cuMemsetD8_v2"`
	// MemHostRegister page-locks existing host memory (flags 0), so that
	// copies between it and the GPU skip the driver's staging buffer;
	// MemHostUnregister undoes it.
	MemHostRegister   func(p unsafe.Pointer, n uintptr, flags uint32) Result              `sym:"cuMemHostRegister_v2"`
	MemHostUnregister func(p unsafe.Pointer) Result                                       `sym:"cuMemHostUnregister"`
	MemcpyHtoD        func(dst DevicePtr, src unsafe.Pointer, n uintptr) Result           `sym:"cuMemcpyHtoD_v2"`
	MemcpyDtoH        func(dst unsafe.Pointer, src DevicePtr, n uintptr) Result           `sym:"cuMemcpyDtoH_v2"`
	MemcpyHtoDAsync   func(dst DevicePtr, src unsafe.Pointer, n uintptr, s Stream) Result `sym:"cuMemcpyHtoDAsync_v2"`
	MemcpyDtoHAsync   func(dst unsafe.Pointer, src DevicePtr, n uintptr, s Stream) Result `sym:"cuMemcpyDtoHAsync_v2"`
	ModuleLoadData    func(mod *Module, image unsafe.Pointer) Result                      `sym:"cuModuleLoadData"`
	ModuleUnload      func(mod Module) Result                                             `sym:"cuModuleUnload"`
	ModuleGetFunction func(fn *Function, mod Module, name string) Result                  `sym:"cuModuleGetFunction"`
	// LaunchKernel's params points to one pointer per kernel parameter, each
	// to that parameter's value; extra is nil here.
	LaunchKernel func(f Function, gridX, gridY, gridZ, blockX, blockY, blockZ, sharedBytes uint32,
		s Stream, params *unsafe.Pointer, extra *unsafe.Pointer) Result `sym:"cuLaunchKernel"`
	StreamCreate      func(s *Stream, flags uint32) Result `sym:"cuStreamCreate"`
	StreamDestroy     func(s Stream) Result                `sym:"cuStreamDestroy_v2"`
	StreamSynchronize func(s Stream) Result                `sym:"cuStreamSynchronize"`
	// StreamQuery answers at once: Success when everything enqueued on s
	// has finished, ErrorNotReady while work is pending (a collective
	// waiting for its peers), else the fault.
	StreamQuery        func(s Stream) Result                               `sym:"cuStreamQuery"`
	StreamBeginCapture func(s Stream, mode int32) Result                   `sym:"cuStreamBeginCapture_v2"`
	StreamEndCapture   func(s Stream, g *Graph) Result                     `sym:"cuStreamEndCapture"`
	GraphInstantiate   func(exec *GraphExec, g Graph, flags uint64) Result `sym:"cuGraphInstantiateWithFlags"`
	GraphLaunch        func(exec GraphExec, s Stream) Result               `sym:"cuGraphLaunch"`
	GraphExecDestroy   func(exec GraphExec) Result                         `sym:"cuGraphExecDestroy"`
	GraphDestroy       func(g Graph) Result                                `sym:"cuGraphDestroy"`
	// EventCreate (flags EventDisableTiming) makes an event; EventRecord
	// marks the point of s reached by the work enqueued so far;
	// StreamWaitEvent (flags 0) makes work enqueued on s after it wait
	// until that point: how the sums of a data-parallel step run on a
	// stream of their own beside the backward pass (Communicator).
	EventCreate     func(ev *Event, flags uint32) Result          `sym:"cuEventCreate"`
	EventRecord     func(ev Event, s Stream) Result               `sym:"cuEventRecord"`
	StreamWaitEvent func(s Stream, ev Event, flags uint32) Result `sym:"cuStreamWaitEvent"`
	EventDestroy    func(ev Event) Result                         `sym:"cuEventDestroy_v2"`
	// EventSynchronize waits until the stream has reached the point ev
	// last recorded (at once when ev was never recorded) and reports a
	// fault of the work before it. EventElapsedTime sets *ms to the GPU
	// time from start to end (in milliseconds, to about 0.5 µs), both
	// recorded, reached, and created without EventDisableTiming: else
	// CUDA_ERROR_INVALID_HANDLE, or CUDA_ERROR_NOT_READY while one is
	// recorded but not reached. How the profile times its ops
	// (profile.go). Drivers from CUDA 12.8 also export
	// cuEventElapsedTime_v2, documented as the same but for reporting
	// fewer faults of pending work; every driver exports this one.
	EventSynchronize func(ev Event) Result                      `sym:"cuEventSynchronize"`
	EventElapsedTime func(ms *float32, start, end Event) Result `sym:"cuEventElapsedTime"`
}

// NVRTCAPI is every NVRTC function (libnvrtc.so) this package calls.
// Reference: https://docs.nvidia.com/cuda/nvrtc/
type NVRTCAPI struct {
	Version        func(major, minor *int32) NVRTCResult `sym:"nvrtcVersion"`
	GetErrorString func(r NVRTCResult) string            `sym:"nvrtcGetErrorString"`
	// GetNumSupportedArchs and GetSupportedArchs list the sm_XY numbers
	// (XY as an int) the library compiles for (NVRTC 11.2 and newer).
	GetNumSupportedArchs func(n *int32) NVRTCResult                                                                        `sym:"nvrtcGetNumSupportedArchs" optional:"true"`
	GetSupportedArchs    func(archs *int32) NVRTCResult                                                                    `sym:"nvrtcGetSupportedArchs" optional:"true"`
	CreateProgram        func(prog *Program, src, name string, numHeaders int32, headers, includeNames **byte) NVRTCResult `sym:"nvrtcCreateProgram"`
	CompileProgram       func(prog Program, numOptions int32, options **byte) NVRTCResult                                  `sym:"nvrtcCompileProgram"`
	DestroyProgram       func(prog *Program) NVRTCResult                                                                   `sym:"nvrtcDestroyProgram"`
	GetProgramLogSize    func(prog Program, size *uintptr) NVRTCResult                                                     `sym:"nvrtcGetProgramLogSize"`
	GetProgramLog        func(prog Program, log *byte) NVRTCResult                                                         `sym:"nvrtcGetProgramLog"`
	GetPTXSize           func(prog Program, size *uintptr) NVRTCResult                                                     `sym:"nvrtcGetPTXSize"`
	GetPTX               func(prog Program, ptx *byte) NVRTCResult                                                         `sym:"nvrtcGetPTX"`
	GetCUBINSize         func(prog Program, size *uintptr) NVRTCResult                                                     `sym:"nvrtcGetCUBINSize" optional:"true"`
	GetCUBIN             func(prog Program, cubin *byte) NVRTCResult                                                       `sym:"nvrtcGetCUBIN" optional:"true"`
}

// BLASAPI is every cuBLAS function (libcublas.so) this package calls. Its
// matrices are column-major; see Engine.Gemm for the row-major mapping.
// Reference: https://docs.nvidia.com/cuda/cublas/
type BLASAPI struct {
	Create        func(h *BLASHandle) BLASStatus                             `sym:"cublasCreate_v2"`
	Destroy       func(h BLASHandle) BLASStatus                              `sym:"cublasDestroy_v2"`
	GetVersion    func(h BLASHandle, version *int32) BLASStatus              `sym:"cublasGetVersion_v2"`
	SetStream     func(h BLASHandle, s Stream) BLASStatus                    `sym:"cublasSetStream_v2"`
	SetMathMode   func(h BLASHandle, mode int32) BLASStatus                  `sym:"cublasSetMathMode"`
	SetWorkspace  func(h BLASHandle, ws DevicePtr, bytes uintptr) BLASStatus `sym:"cublasSetWorkspace_v2" optional:"true"`
	GetStatusName func(s BLASStatus) string                                  `sym:"cublasGetStatusName" optional:"true"`
	Sgemm         func(h BLASHandle, transA, transB Operation, m, n, k int32, alpha *float32, a DevicePtr, lda int32,
		b DevicePtr, ldb int32, beta *float32, c DevicePtr, ldc int32) BLASStatus `sym:"cublasSgemm_v2"`
	// SgemmStridedBatched is batch Sgemms, the i-th on the matrices at
	// a + i·strideA, b + i·strideB, c + i·strideC (strides in elements).
	SgemmStridedBatched func(h BLASHandle, transA, transB Operation, m, n, k int32, alpha *float32, a DevicePtr, lda int32, strideA int64,
		b DevicePtr, ldb int32, strideB int64, beta *float32, c DevicePtr, ldc int32, strideC int64, batch int32) BLASStatus `sym:"cublasSgemmStridedBatched"`
	// GemmEx is Sgemm with the matrices' data types (aType, bType, cType:
	// cudaDataType_t) and the arithmetic (computeType: cublasComputeType_t)
	// given, and the kernel chosen by algo (cublasGemmAlgo_t); alpha and
	// beta are of the compute type's scalar type (float for every 32F
	// compute type). 19 arguments.
	GemmEx func(h BLASHandle, transA, transB Operation, m, n, k int32, alpha *float32, a DevicePtr, aType, lda int32,
		b DevicePtr, bType, ldb int32, beta *float32, c DevicePtr, cType, ldc int32, computeType, algo int32) BLASStatus `sym:"cublasGemmEx"`
	// GemmStridedBatchedEx is GemmEx batch times, the i-th on the
	// matrices at a + i·strideA, b + i·strideB, c + i·strideC (strides in
	// elements). 23 arguments.
	GemmStridedBatchedEx func(h BLASHandle, transA, transB Operation, m, n, k int32, alpha *float32, a DevicePtr, aType, lda int32, strideA int64,
		b DevicePtr, bType, ldb int32, strideB int64, beta *float32, c DevicePtr, cType, ldc int32, strideC int64,
		batch, computeType, algo int32) BLASStatus `sym:"cublasGemmStridedBatchedEx"`
}

// cString reads a NUL-terminated C string that a library returned; nil is
// the empty string.
func cString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}
