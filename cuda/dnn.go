package cuda

import (
	"fmt"
	"sync"

	"github.com/mlbuild/mlbuild/rt/gpuhost"
)

// cuDNN (libcudnn.so.9, which every PyTorch install brings) runs the
// library convolutions of gpuhost.Conv through its legacy imperative API:
// tensor, filter and convolution descriptors, the _v7 heuristics, and one
// call a product. Only a program that records a Conv loads it
// (Libraries.LoadDNN), so a program without convolutions runs on a
// machine without cuDNN. Its C types as Go types of the same size:
type (
	// DNNStatus is a cudnnStatus_t; 0 is CUDNN_STATUS_SUCCESS.
	DNNStatus int32
	// DNNHandle is a cudnnHandle_t.
	DNNHandle uintptr
	// TensorDesc is a cudnnTensorDescriptor_t.
	TensorDesc uintptr
	// FilterDesc is a cudnnFilterDescriptor_t.
	FilterDesc uintptr
	// ConvDesc is a cudnnConvolutionDescriptor_t.
	ConvDesc uintptr
	// ActivationDesc is a cudnnActivationDescriptor_t.
	ActivationDesc uintptr
)

// ConvAlgoPerf is cudnnConvolutionFwdAlgoPerf_t, and the BwdData and
// BwdFilter structs of the same layout (48 bytes on 64-bit platforms):
// one algorithm the _v7 heuristics propose, its status, its workspace in
// bytes, and the math it runs in.
type ConvAlgoPerf struct {
	Algo        int32
	Status      DNNStatus
	Time        float32
	_           int32 // the padding before the size_t
	Memory      uintptr
	Determinism int32
	MathType    int32
	Reserved    [3]int32
	_           int32
}

// The values of cuDNN's enums this package passes or checks (cuDNN 9's
// cudnn_graph.h and cudnn_cnn.h).
const (
	DNNSuccess       DNNStatus = 0
	DNNNotInitalized DNNStatus = 1001 // CUDNN_STATUS_NOT_INITIALIZED
	DNNBadParam      DNNStatus = 2000 // CUDNN_STATUS_BAD_PARAM
	DNNNotSupported  DNNStatus = 3000 // CUDNN_STATUS_NOT_SUPPORTED
	DNNInternalError DNNStatus = 4000 // CUDNN_STATUS_INTERNAL_ERROR
	DNNExecFailed    DNNStatus = 5000 // CUDNN_STATUS_EXECUTION_FAILED

	// cudnnDataType_t values: FLOAT, DOUBLE, HALF, INT8, INT32, INT8x4,
	// UINT8, UINT8x4, INT8x32, BFLOAT16 in that order from 0. A bf16
	// convolution's tensors and filter are CUDNN_DATA_BFLOAT16 and its
	// compute type CUDNN_DATA_FLOAT (PSEUDO_BFLOAT16_CONFIG).
	DNNDataFloat    int32 = 0 // CUDNN_DATA_FLOAT
	DNNDataBFloat16 int32 = 9 // CUDNN_DATA_BFLOAT16

	// cudnnTensorFormat_t values: NCHW, NHWC, NCHW_VECT_C from 0.
	// DNNTensorNCHW is CUDNN_TENSOR_NCHW: packed row-major tensors and
	// filters [K, C, H, W] (KCRS); DNNTensorNHWC is CUDNN_TENSOR_NHWC,
	// packed channels-last tensors [N, H, W, C] and filters [K, H, W, C]
	// (KRSC), a channels-last Conv's X, Y and W.
	DNNTensorNCHW int32 = 0
	DNNTensorNHWC int32 = 1

	// DNNCrossCorrelation is cudnnConvolutionMode_t's
	// CUDNN_CROSS_CORRELATION (the filter not flipped: what deep learning
	// calls a convolution); DNNConvolution (0) flips it.
	DNNConvolution      int32 = 0
	DNNCrossCorrelation int32 = 1

	// cudnnMathType_t values. DNNDefaultMath lets cuDNN use TF32 tensor
	// cores on float data (Ampere and newer); DNNTensorOpMath asks for
	// tensor cores (TF32 for float data, bfloat16 ones for bfloat16
	// data); DNNFMAMath restricts cuDNN to FMA kernels: float32 products.
	DNNDefaultMath  int32 = 0
	DNNTensorOpMath int32 = 1
	DNNFMAMath      int32 = 3

	// DNNDeterministic is cudnnDeterminism_t's CUDNN_DETERMINISTIC: an
	// algorithm whose results do not depend on the order its threads
	// finish in.
	DNNDeterministic int32 = 1

	// cudnnActivationMode_t values a fused forward's epilogue takes
	// (cudnnConvolutionBiasActivationForward): CUDNN_ACTIVATION_RELU,
	// and CUDNN_ACTIVATION_IDENTITY, which cuDNN documents to work with
	// CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM only
	// (DNNFwdAlgoImplicitPrecompGemm). DNNNotPropagateNaN is
	// cudnnNanPropagation_t's CUDNN_NOT_PROPAGATE_NAN.
	DNNActivationReLU     int32 = 1
	DNNActivationIdentity int32 = 5
	DNNNotPropagateNaN    int32 = 0

	// DNNFwdAlgoImplicitPrecompGemm is cudnnConvolutionFwdAlgo_t's
	// CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, the one forward
	// algorithm a fused forward without an activation runs.
	DNNFwdAlgoImplicitPrecompGemm int32 = 1

	// The algorithm counts (CUDNN_CONVOLUTION_FWD_ALGO_COUNT, …): the
	// most results the _v7 heuristics return.
	DNNFwdAlgoCount       = 8
	DNNBwdDataAlgoCount   = 6
	DNNBwdFilterAlgoCount = 7
)

// dnnProductAlgos are, for each product (gpuhost.ConvProduct's order:
// forward, input gradient, weight gradient), the algorithms whose
// arithmetic is float32 products summed in float32, indexed by the
// value of cudnnConvolutionFwdAlgo_t, cudnnConvolutionBwdDataAlgo_t and
// cudnnConvolutionBwdFilterAlgo_t: the implicit-GEMM, GEMM and direct
// families (forward IMPLICIT_GEMM 0, IMPLICIT_PRECOMP_GEMM 1, GEMM 2,
// DIRECT 3; input gradient ALGO_0 and ALGO_1; weight gradient ALGO_0,
// ALGO_1 and ALGO_3, whose sums of products are float32 too, in an
// order that atomics make vary). The others transform their operands
// first (forward FFT 4, FFT_TILING 5, WINOGRAD 6, WINOGRAD_NONFUSED 7;
// input gradient FFT 2, FFT_TILING 3, WINOGRAD 4, WINOGRAD_NONFUSED 5;
// weight gradient FFT 2, WINOGRAD 4, WINOGRAD_NONFUSED 5, FFT_TILING 6),
// so their rounding is the transforms' and not that of a float32 sum of
// float32 products, the meaning of PrecisionF32 in gpuhost's Gemm and
// Conv contracts (CUDNN_FMA_MATH alone does not exclude them: an H200
// under it chose FFT for two ResNet-18 forwards, FFT_TILING for two
// input gradients and WINOGRAD_NONFUSED for four weight gradients).
var dnnProductAlgos = [3][]bool{
	{true, true, true, true, false, false, false, false},
	{true, true, false, false, false, false},
	{true, true, false, true, false, false, false},
}

// DNNFloat32Algo reports whether cuDNN's algorithm algo of product p
// computes float32 products summed in float32: what a convolution in
// PrecisionF32 may run (gpuhost.Conv's contract).
func DNNFloat32Algo(p gpuhost.ConvProduct, algo int32) bool {
	return p < gpuhost.ConvProduct(len(dnnProductAlgos)) && algo >= 0 && int(algo) < len(dnnProductAlgos[p]) && dnnProductAlgos[p][algo]
}

// DNNAPI is every cuDNN function this package calls, one field each, as
// BLASAPI is for cuBLAS; the legacy API that libcudnn.so.9 still exports.
// Reference: https://docs.nvidia.com/deeplearning/cudnn/api/
type DNNAPI struct {
	// GetVersion is cudnnGetVersion: major·10000 + minor·100 + patch from
	// cuDNN 9 on (major·1000 + minor·100 + patch before).
	GetVersion     func() uintptr                             `sym:"cudnnGetVersion"`
	GetErrorString func(s DNNStatus) string                   `sym:"cudnnGetErrorString"`
	Create         func(h *DNNHandle) DNNStatus               `sym:"cudnnCreate"`
	Destroy        func(h DNNHandle) DNNStatus                `sym:"cudnnDestroy"`
	SetStream      func(h DNNHandle, s Stream) DNNStatus      `sym:"cudnnSetStream"`
	CreateTensor   func(d *TensorDesc) DNNStatus              `sym:"cudnnCreateTensorDescriptor"`
	DestroyTensor  func(d TensorDesc) DNNStatus               `sym:"cudnnDestroyTensorDescriptor"`
	CreateFilter   func(d *FilterDesc) DNNStatus              `sym:"cudnnCreateFilterDescriptor"`
	DestroyFilter  func(d FilterDesc) DNNStatus               `sym:"cudnnDestroyFilterDescriptor"`
	CreateConv     func(d *ConvDesc) DNNStatus                `sym:"cudnnCreateConvolutionDescriptor"`
	DestroyConv    func(d ConvDesc) DNNStatus                 `sym:"cudnnDestroyConvolutionDescriptor"`
	SetConvMath    func(d ConvDesc, mathType int32) DNNStatus `sym:"cudnnSetConvolutionMathType"`
	SetConvGroups  func(d ConvDesc, groups int32) DNNStatus   `sym:"cudnnSetConvolutionGroupCount"`
	// SetTensor4d is cudnnSetTensor4dDescriptor(desc, format, dataType,
	// n, c, h, w); SetFilter4d is cudnnSetFilter4dDescriptor(desc,
	// dataType, format, k, c, h, w): the two orders differ.
	SetTensor4d func(d TensorDesc, format, dataType, n, c, h, w int32) DNNStatus `sym:"cudnnSetTensor4dDescriptor"`
	SetFilter4d func(d FilterDesc, dataType, format, k, c, h, w int32) DNNStatus `sym:"cudnnSetFilter4dDescriptor"`
	// SetConv2d is cudnnSetConvolution2dDescriptor(desc, padH, padW,
	// strideH, strideW, dilationH, dilationW, mode, computeType).
	SetConv2d func(d ConvDesc, padH, padW, strideH, strideW, dilH, dilW, mode, computeType int32) DNNStatus `sym:"cudnnSetConvolution2dDescriptor"`
	// The _v7 heuristics: up to requested algorithms, best first.
	FwdAlgo func(h DNNHandle, x TensorDesc, w FilterDesc, conv ConvDesc, y TensorDesc,
		requested int32, returned *int32, perf *ConvAlgoPerf) DNNStatus `sym:"cudnnGetConvolutionForwardAlgorithm_v7"`
	BwdDataAlgo func(h DNNHandle, w FilterDesc, dy TensorDesc, conv ConvDesc, dx TensorDesc,
		requested int32, returned *int32, perf *ConvAlgoPerf) DNNStatus `sym:"cudnnGetConvolutionBackwardDataAlgorithm_v7"`
	BwdFilterAlgo func(h DNNHandle, x TensorDesc, dy TensorDesc, conv ConvDesc, dw FilterDesc,
		requested int32, returned *int32, perf *ConvAlgoPerf) DNNStatus `sym:"cudnnGetConvolutionBackwardFilterAlgorithm_v7"`
	FwdWorkspace func(h DNNHandle, x TensorDesc, w FilterDesc, conv ConvDesc, y TensorDesc,
		algo int32, bytes *uintptr) DNNStatus `sym:"cudnnGetConvolutionForwardWorkspaceSize"`
	BwdDataWorkspace func(h DNNHandle, w FilterDesc, dy TensorDesc, conv ConvDesc, dx TensorDesc,
		algo int32, bytes *uintptr) DNNStatus `sym:"cudnnGetConvolutionBackwardDataWorkspaceSize"`
	BwdFilterWorkspace func(h DNNHandle, x TensorDesc, dy TensorDesc, conv ConvDesc, dw FilterDesc,
		algo int32, bytes *uintptr) DNNStatus `sym:"cudnnGetConvolutionBackwardFilterWorkspaceSize"`
	// The products, each 13 arguments: alpha and beta point to float32s
	// (the scalars of float data), read when the call is made.
	Forward func(h DNNHandle, alpha *float32, xd TensorDesc, x DevicePtr, wd FilterDesc, w DevicePtr, conv ConvDesc,
		algo int32, ws DevicePtr, wsBytes uintptr, beta *float32, yd TensorDesc, y DevicePtr) DNNStatus `sym:"cudnnConvolutionForward"`
	BackwardData func(h DNNHandle, alpha *float32, wd FilterDesc, w DevicePtr, dyd TensorDesc, dy DevicePtr, conv ConvDesc,
		algo int32, ws DevicePtr, wsBytes uintptr, beta *float32, dxd TensorDesc, dx DevicePtr) DNNStatus `sym:"cudnnConvolutionBackwardData"`
	BackwardFilter func(h DNNHandle, alpha *float32, xd TensorDesc, x DevicePtr, dyd TensorDesc, dy DevicePtr, conv ConvDesc,
		algo int32, ws DevicePtr, wsBytes uintptr, beta *float32, dwd FilterDesc, dw DevicePtr) DNNStatus `sym:"cudnnConvolutionBackwardFilter"`
	// The fused forward, 18 arguments: y = act(alpha1·conv(x, w) +
	// alpha2·z + bias), bias a tensor of 1×K×1×1 of the data type of x
	// and y (cuDNN 9.19 refuses a float bias on bfloat16 data with 3003)
	// and act an activation descriptor's; alpha1 and alpha2 point to
	// float32s, and z must be a valid tensor even when alpha2 is 0.
	BiasActivationForward func(h DNNHandle, alpha1 *float32, xd TensorDesc, x DevicePtr, wd FilterDesc, w DevicePtr, conv ConvDesc,
		algo int32, ws DevicePtr, wsBytes uintptr, alpha2 *float32, zd TensorDesc, z DevicePtr, biasd TensorDesc, bias DevicePtr,
		act ActivationDesc, yd TensorDesc, y DevicePtr) DNNStatus `sym:"cudnnConvolutionBiasActivationForward"`
	CreateActivation  func(d *ActivationDesc) DNNStatus `sym:"cudnnCreateActivationDescriptor"`
	DestroyActivation func(d ActivationDesc) DNNStatus  `sym:"cudnnDestroyActivationDescriptor"`
	// SetActivation is cudnnSetActivationDescriptor(desc, mode,
	// reluNanOpt, coef): coef is a C double (purego passes a float64 in
	// a floating-point register, as the C ABI does), the clipping or
	// slope of the modes that have one, 0 here.
	SetActivation func(d ActivationDesc, mode, nanOpt int32, coef float64) DNNStatus `sym:"cudnnSetActivationDescriptor"`
}

// dnnLibrary is where cuDNN is looked for: the sonames, the CUDA
// toolkit's folders, and the folders of NVIDIA's pip wheels
// (nvidia/cudnn/lib, which PyTorch installs; nvidia/cu13/lib, where
// CUDA 13's wheels put their libraries), in the order
// library.candidates documents.
var dnnLibrary = library{
	name: "cuDNN", env: "MLBUILD_CUDNN_LIB", sonames: []string{"libcudnn.so.9"},
	toolkit: true, wheelDirs: []string{"nvidia/cudnn/lib", "nvidia/cu13/lib"},
	fix: "`pip install nvidia-cudnn-cu13` (nvidia-cudnn-cu12 for CUDA 12; PyTorch's wheels bring it), or the distribution's cuDNN 9 package (libcudnn9-cuda-12 or -13)",
}

// dnnSublibraries are the libraries libcudnn.so.9 loads by soname when
// first called (cuDNN 9 is a shim over them), in the order of their
// dependencies (libcudnn_graph first); LoadDNN opens those beside the
// file it found first, so that the shim finds them already loaded when
// nothing puts their folder on the loader's path (a pip wheel's).
var dnnSublibraries = []string{"libcudnn_graph.so.9", "libcudnn_engines_precompiled.so.9", "libcudnn_engines_runtime_compiled.so.9",
	"libcudnn_heuristic.so.9", "libcudnn_ops.so.9", "libcudnn_cnn.so.9"}

// MissingDNNError is the error of a cuDNN that could not be loaded, each
// of tried a line "PATH: why"; for a fake that simulates a machine
// without cuDNN.
func MissingDNNError(tried ...string) *MissingLibraryError {
	m := dnnLibrary.describeMissing(nil)
	m.Tried = tried
	return &MissingLibraryError{Missing: []MissingLibrary{m}}
}

// dnnLoading serialises the loading of cuDNN into a Libraries that
// several Engines share.
var dnnLoading sync.Mutex

// loadDNN fills l.DNN once: from l.DNNLoad where set (a fake), else from
// the system (LoadDNN's search).
func (l *Libraries) loadDNN() error {
	dnnLoading.Lock()
	defer dnnLoading.Unlock()
	if l.DNN != nil {
		return nil
	}
	if l.DNNLoad != nil {
		api, f, err := l.DNNLoad()
		if err != nil {
			return err
		}
		l.DNN = api
		l.Files = append(l.Files, f)
		return nil
	}
	return l.LoadDNN()
}

// dnnVersionString prints cudnnGetVersion's number.
func dnnVersionString(v uintptr) string {
	if v >= 90000 {
		return fmt.Sprintf("%d.%d.%d", v/10000, v%10000/100, v%100)
	}
	return fmt.Sprintf("%d.%d.%d", v/1000, v%1000/100, v%100)
}

// dnnStatusNames are cudnnStatus_t's names of the categories (cuDNN 9
// numbers each category in thousands, its details below).
var dnnStatusNames = map[DNNStatus]string{
	0: "CUDNN_STATUS_SUCCESS", 1000: "CUDNN_STATUS_NOT_INITIALIZED", 1001: "CUDNN_STATUS_NOT_INITIALIZED",
	2000: "CUDNN_STATUS_BAD_PARAM", 3000: "CUDNN_STATUS_NOT_SUPPORTED", 4000: "CUDNN_STATUS_INTERNAL_ERROR",
	5000: "CUDNN_STATUS_EXECUTION_FAILED",
}

// dnnError describes a failed cuDNN call.
func (l *Libraries) dnnError(call string, s DNNStatus, context string) error {
	if s == DNNSuccess {
		return nil
	}
	e := &Error{Call: call, Code: int(s), Name: fmt.Sprintf("cudnnStatus_t %d", s), Context: context}
	if n, ok := dnnStatusNames[s]; ok {
		e.Name = n
	} else if n, ok := dnnStatusNames[s/1000*1000]; ok {
		e.Name = n + " (detail " + fmt.Sprint(s%1000) + ")"
	}
	if l.DNN != nil && l.DNN.GetErrorString != nil {
		e.Message = l.DNN.GetErrorString(s)
	}
	return e
}
