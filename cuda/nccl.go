package cuda

import (
	"fmt"
)

// NCCL, NVIDIA's collective communication library (libnccl.so.2), sums
// gradients across GPUs for data-parallel training. A run on one GPU
// never loads it: LoadNCCL is separate from LoadLibraries, and a machine
// without NCCL runs every single-GPU program. Its C types as Go types of
// the same size:
type (
	// NCCLResult is an ncclResult_t; 0 is ncclSuccess.
	NCCLResult int32
	// NCCLComm is an ncclComm_t, one rank's communicator.
	NCCLComm uintptr
	// NCCLDataType is an ncclDataType_t.
	NCCLDataType int32
	// NCCLRedOp is an ncclRedOp_t.
	NCCLRedOp int32
)

// NCCLUniqueIDBytes is NCCL_UNIQUE_ID_BYTES.
const NCCLUniqueIDBytes = 128

// NCCLUniqueID is an ncclUniqueId: the opaque bytes rank 0 makes with
// ncclGetUniqueId and every rank passes, by value, to ncclCommInitRank
// (the rendezvous carries it; rt/rendezvous).
type NCCLUniqueID struct {
	Internal [NCCLUniqueIDBytes]byte
}

// The values of NCCL's enums this package passes or checks (nccl.h).
const (
	NCCLSuccess            NCCLResult = 0
	NCCLUnhandledCudaError NCCLResult = 1
	NCCLSystemError        NCCLResult = 2
	NCCLInternalError      NCCLResult = 3
	NCCLInvalidArgument    NCCLResult = 4
	NCCLInvalidUsage       NCCLResult = 5
	NCCLRemoteError        NCCLResult = 6 // NCCL 2.9 and newer
	NCCLInProgress         NCCLResult = 7 // NCCL 2.14 and newer

	NCCLFloat32  NCCLDataType = 7
	NCCLBfloat16 NCCLDataType = 9 // NCCL 2.10 and newer; for bf16 gradients later

	NCCLSum NCCLRedOp = 0
)

// NCCLAPI is every NCCL function this package calls, one field each, as
// DriverAPI is for the driver. ncclapi_test.go checks each against the
// prototypes of NVIDIA's NCCL documentation (testdata/nccl-api.txt).
// Reference: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/api.html
type NCCLAPI struct {
	GetVersion     func(version *int32) NCCLResult `sym:"ncclGetVersion"`
	GetErrorString func(r NCCLResult) string       `sym:"ncclGetErrorString"`
	// GetLastError says more about the last failure than its code (NCCL
	// 2.13 and newer).
	GetLastError func(comm NCCLComm) string        `sym:"ncclGetLastError" optional:"true"`
	GetUniqueID  func(id *NCCLUniqueID) NCCLResult `sym:"ncclGetUniqueId"`
	// CommInitRank takes the unique id by value (128 bytes, on the stack
	// on amd64, by reference on arm64: purego follows each ABI). It
	// blocks until every rank of the clique has called it, so the ranks of
	// one process call it on their own threads at once.
	CommInitRank func(comm *NCCLComm, nranks int32, id NCCLUniqueID, rank int32) NCCLResult `sym:"ncclCommInitRank"`
	// AllReduce enqueues on stream the reduction of count elements of
	// send on every rank into recv on every rank; send == recv is in place.
	AllReduce func(send, recv DevicePtr, count uintptr, dt NCCLDataType, op NCCLRedOp, comm NCCLComm, stream Stream) NCCLResult `sym:"ncclAllReduce"`
	// GroupStart and GroupEnd bracket several collectives of a thread that
	// NCCL then launches as one (aggregated operations, NCCL 2.2+).
	GroupStart func() NCCLResult `sym:"ncclGroupStart"`
	GroupEnd   func() NCCLResult `sym:"ncclGroupEnd"`
	// CommGetAsyncError reports an error found while collectives run (a
	// peer gone, a network failure), which no call returns.
	CommGetAsyncError func(comm NCCLComm, asyncErr *NCCLResult) NCCLResult `sym:"ncclCommGetAsyncError"`
	// CommAbort ends a communicator at once, pending collectives included;
	// it may be called from any thread, and frees the communicator.
	CommAbort func(comm NCCLComm) NCCLResult `sym:"ncclCommAbort"`
	// CommDestroy frees a communicator after its collectives finished.
	CommDestroy func(comm NCCLComm) NCCLResult `sym:"ncclCommDestroy"`
}

// ncclLibrary is where NCCL is looked for: the sonames, the CUDA toolkit's
// folders (where NVIDIA's packages put it), and the PyTorch wheel's folder
// nvidia/nccl/lib, in the order library.candidates documents.
var ncclLibrary = library{
	name: "NCCL", env: "MLBUILD_NCCL_LIB", sonames: []string{"libnccl.so.2"},
	toolkit: true, wheelDirs: []string{"nvidia/nccl/lib"},
	fix: "install NCCL (NVIDIA's libnccl2 package, or `pip install nvidia-nccl-cu12`, which PyTorch's wheels also bring), or run on one GPU (--gpus 1), which needs no NCCL",
}

// ncclVersionString prints ncclGetVersion's number: X·10000 + Y·100 + Z
// from NCCL 2.9 on, X·1000 + Y·100 + Z before.
func ncclVersionString(v int32) string {
	if v >= 20900 {
		return fmt.Sprintf("%d.%d.%d", v/10000, v%10000/100, v%100)
	}
	return fmt.Sprintf("%d.%d.%d", v/1000, v%1000/100, v%100)
}

// ncclNames are ncclResult_t's names.
var ncclNames = map[NCCLResult]string{
	0: "ncclSuccess", 1: "ncclUnhandledCudaError", 2: "ncclSystemError", 3: "ncclInternalError",
	4: "ncclInvalidArgument", 5: "ncclInvalidUsage", 6: "ncclRemoteError", 7: "ncclInProgress",
}

// ncclError describes a failed NCCL call, with the library's message for
// its status and, where it has one, its last error's detail.
func (l *Libraries) ncclError(call string, r NCCLResult, comm NCCLComm, context string) error {
	if r == NCCLSuccess {
		return nil
	}
	e := &Error{Call: call, Code: int(r), Name: fmt.Sprintf("ncclResult_t %d", r), Context: context}
	if n, ok := ncclNames[r]; ok {
		e.Name = n
	}
	if l.NCCL.GetErrorString != nil {
		e.Message = l.NCCL.GetErrorString(r)
	}
	if l.NCCL.GetLastError != nil {
		if last := l.NCCL.GetLastError(comm); last != "" {
			e.Message += " (" + last + ")"
		}
	}
	return e
}
