package cuda

import (
	"errors"
	"fmt"

	"github.com/mlbuild/mlbuild/rt/gpuhost"
)

// ErrNoDevice is wrapped by every error that means "this machine cannot run
// CUDA" (no driver, no GPU, a missing library, a driver too old), so a
// program can tell it apart from a bug and suggest the CPU backend. It
// wraps gpuhost.ErrNoDevice.
var ErrNoDevice = fmt.Errorf("%w: no usable NVIDIA GPU", gpuhost.ErrNoDevice)

// Error is a failed call into one of NVIDIA's libraries.
type Error struct {
	// Call is the C function, e.g. "cuMemAlloc_v2".
	Call string
	// Code is the status it returned (CUresult, nvrtcResult or
	// cublasStatus_t, by Call's library).
	Code int
	// Name is the status's name, e.g. "CUDA_ERROR_OUT_OF_MEMORY".
	Name string
	// Message is the library's description of the status.
	Message string
	// Context says what the call was doing, e.g. "allocating 4096 bytes
	// for \"weights\"". May be empty.
	Context string
	// driver is set for driver API calls, whose statuses may mean "no GPU".
	driver bool
}

// Error prints the call, what it was doing, and the status's name, code
// and message.
func (e *Error) Error() string {
	s := "cuda: " + e.Call
	if e.Context != "" {
		s += " (" + e.Context + ")"
	}
	s += fmt.Sprintf(": %s (%d)", e.Name, e.Code)
	if e.Message != "" && e.Message != e.Name {
		s += ": " + e.Message
	}
	return s
}

// noDeviceResults are the driver statuses that mean the machine has no
// usable GPU rather than that the program misused one.
var noDeviceResults = map[Result]bool{ErrorNoDevice: true, ErrorInsufficientDriver: true, ErrorInvalidDevice: true, 34: true /* CUDA_ERROR_STUB_LIBRARY */, 46: true /* CUDA_ERROR_DEVICES_UNAVAILABLE */, 804: true /* CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE */}

// Is reports whether a driver error means "no usable GPU".
func (e *Error) Is(target error) bool {
	if target != ErrNoDevice && target != gpuhost.ErrNoDevice {
		return false
	}
	return e.driver && noDeviceResults[Result(e.Code)]
}

// driverError describes a failed driver call, asking the driver for the
// status's name and message (it answers even when nothing else works).
func (l *Libraries) driverError(call string, r Result, context string) error {
	if r == Success {
		return nil
	}
	e := &Error{Call: call, Code: int(r), Name: fmt.Sprintf("CUresult %d", r), Context: context, driver: true}
	var name, msg *byte
	if l.Driver.GetErrorName != nil && l.Driver.GetErrorName(r, &name) == Success {
		e.Name = cString(name)
	}
	if l.Driver.GetErrorString != nil && l.Driver.GetErrorString(r, &msg) == Success {
		e.Message = cString(msg)
	}
	return e
}

// nvrtcError describes a failed NVRTC call.
func (l *Libraries) nvrtcError(call string, r NVRTCResult, context string) error {
	if r == NVRTCSuccess {
		return nil
	}
	e := &Error{Call: call, Code: int(r), Name: fmt.Sprintf("nvrtcResult %d", r), Context: context}
	if l.NVRTC.GetErrorString != nil {
		e.Name = l.NVRTC.GetErrorString(r)
	}
	return e
}

// blasStatusNames are cublasStatus_t's names, for libraries too old to
// have cublasGetStatusName.
var blasStatusNames = map[BLASStatus]string{
	0: "CUBLAS_STATUS_SUCCESS", 1: "CUBLAS_STATUS_NOT_INITIALIZED", 3: "CUBLAS_STATUS_ALLOC_FAILED",
	7: "CUBLAS_STATUS_INVALID_VALUE", 8: "CUBLAS_STATUS_ARCH_MISMATCH", 11: "CUBLAS_STATUS_MAPPING_ERROR",
	13: "CUBLAS_STATUS_EXECUTION_FAILED", 14: "CUBLAS_STATUS_INTERNAL_ERROR", 15: "CUBLAS_STATUS_NOT_SUPPORTED",
	16: "CUBLAS_STATUS_LICENSE_ERROR",
}

// blasError describes a failed cuBLAS call.
func (l *Libraries) blasError(call string, s BLASStatus, context string) error {
	if s == BLASSuccess {
		return nil
	}
	e := &Error{Call: call, Code: int(s), Name: fmt.Sprintf("cublasStatus_t %d", s), Context: context}
	if n, ok := blasStatusNames[s]; ok {
		e.Name = n
	}
	if l.BLAS.GetStatusName != nil {
		e.Name = l.BLAS.GetStatusName(s)
	}
	return e
}

// errClosed is returned by every call on a closed Engine or Device.
var errClosed = errors.New("cuda: the device is closed")
