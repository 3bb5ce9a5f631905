package fakecuda

import (
	"encoding/binary"
	"maps"
	"time"
	"unsafe"

	"github.com/mlbuild/mlbuild/cuda"
	"github.com/mlbuild/mlbuild/rt/gpuhost"
)

// The fake cuDNN computes the three products of a convolution in Go loops
// on the simulated memory, and checks what cuDNN checks, with its status
// codes: a handle made by cudnnCreate (CUDNN_STATUS_NOT_INITIALIZED
// otherwise); descriptors created and set, the two tensors and the filter
// all in the NCHW format (the filter KCRS) or all in the NHWC format
// (channels-last; the filter KRSC, [K, R, S, C]: the products then read
// and write all three so), the tensors and the filter all of float data or
// all of bfloat16 data (cuDNN's FLOAT_CONFIG and PSEUDO_BFLOAT16_CONFIG),
// with sizes that agree (the filter's channels times the groups are the
// input's, its count the output's, divisible by the groups, the output
// what the window gives), a cross-correlation in float compute
// (CUDNN_STATUS_BAD_PARAM for a disagreement, data types that differ among
// them included, CUDNN_STATUS_NOT_SUPPORTED for another data type, compute
// type, format or mode: an NHWC filter with NCHW tensors, an NCHW filter
// with NHWC tensors, tensors of different formats, NCHW_VECT_C; stricter
// than cuDNN, which takes some of them (cuDNN 9.14 runs the forward
// product of NHWC tensors with an NCHW filter but proposes no algorithm
// for its two gradients), but mlbuild passes none); an algorithm the
// heuristics proposed, and a workspace of at least that algorithm's bytes
// inside a live allocation (CUDNN_STATUS_BAD_PARAM). The _v7 heuristics
// propose five algorithms: one whose status is CUDNN_STATUS_NOT_SUPPORTED
// (5), one deterministic that succeeds with a small workspace (twice the
// last one's) but is of the FFT or Winograd family (4: FFT forward,
// WINOGRAD backward; what an f32 convolution must not run), one that
// succeeds with 2 GiB of workspace (2), one that succeeds but is not
// deterministic (0), and last one deterministic that succeeds with a
// workspace of 1 KiB plus 4 bytes per filter element (1); all but the first run, and ConvAlgorithms counts the
// runs of each, so that a test sees which the host chose. The fake
// computes every algorithm alike (below): which one ran is seen only in
// ConvAlgorithms; Options.ConvAlgoDelay makes the runs of one slower,
// so that a test sees the host time them, and Fake.RefuseConvAlgo makes
// the calls of one fail. Stricter than cuDNN: the handle's creation and
// destruction, the heuristics and the workspace queries are refused on a
// thread that is capturing (CUDNN_STATUS_NOT_SUPPORTED, the capture
// invalidated), as mlbuild chooses before it captures. The math type sets
// the arithmetic: CUDNN_FMA_MATH multiplies the float32 values,
// CUDNN_DEFAULT_MATH and CUDNN_TENSOR_OP_MATH first round each element of
// both operands to TF32, as a Hopper GPU's tensor cores do with float
// data; either way the products are summed in float64 and the sum rounded
// to float32 (as the fake's Sgemm). On bfloat16 data, in any math, the
// operands are the stored bfloat16 values (decoded exactly), their
// products summed alike, the output Alpha·sum + Beta·output in float32
// (the old output decoded from bfloat16) stored rounded to bfloat16 (to
// nearest, ties to even).
//
// The fused forward (cudnnConvolutionBiasActivationForward) computes
// act(alpha1·conv + alpha2·z + bias[k]) alike: alpha1·sum in float32,
// plus alpha2·z (z not read when alpha2 is 0, so that y may stand for it
// over old values of NaN), plus the channel's bias, then the activation,
// stored as the plain forward stores (rounded to bfloat16 on bfloat16
// data). Beyond a forward's checks (a NULL alpha1 or alpha2 is
// CUDNN_STATUS_BAD_PARAM) it checks what cuDNN does: an activation
// descriptor created and set, of mode CUDNN_ACTIVATION_RELU or
// CUDNN_ACTIVATION_IDENTITY (CUDNN_STATUS_NOT_SUPPORTED for another; BAD_PARAM for
// one not set), IDENTITY only with the algorithm IMPLICIT_PRECOMP_GEMM
// (1; 3003 for another, as cuDNN documents the rule), a z descriptor of
// y's sizes, format and data type and a bias descriptor of 1×K×1×1 in
// either format (CUDNN_STATUS_BAD_PARAM otherwise), the bias of the
// tensors' data type (3003, CUDNN_STATUS_NOT_SUPPORTED's detail 3, for a
// float bias on bfloat16 data or the reverse: cuDNN 9.19 on an H200
// returned 3003 for a float bias on bfloat16 data).
//
// A product on a capturing stream is recorded into the graph and runs
// when it is launched; its pointers are checked when it runs
// (CUDA_ERROR_ILLEGAL_ADDRESS at the next synchronisation).

// The algorithms the fake's heuristics propose, in their order.
const (
	fakeAlgoRefused   int32 = 5 // CUDNN_STATUS_NOT_SUPPORTED
	fakeAlgoTransform int32 = 4 // FFT forward, WINOGRAD backward
	fakeAlgoHuge      int32 = 2 // 2 GiB of workspace
	fakeAlgoUnstable  int32 = 0 // not deterministic
	fakeAlgoGood      int32 = 1
)

// fakeHugeWorkspace is fakeAlgoHuge's workspace.
const fakeHugeWorkspace = 2 << 30

type dnnHandle struct{ stream cuda.Stream }

type dnnTensor struct {
	set                 bool
	act                 int32 // an activation descriptor's mode
	format, dtype       int32
	n, c, h, w          int
	filter              bool // a filter descriptor: n is K, c its channels
	pad, stride, dilate [2]int
	mode, compute, math int32
	groups              int
}

// convCall is one cuDNN product with the descriptors' values at the
// call (a captured one keeps them) and its scalars.
type convCall struct {
	delay       time.Duration // Options.ConvAlgoDelay of its algorithm
	g           gpuhost.ConvGeom
	product     gpuhost.ConvProduct
	x, w, y     uint64
	alpha, beta float32
	precision   gpuhost.Precision
	bf16        bool // bfloat16 tensors: 2 bytes an element
	nhwc        bool // x and y channels-last, w KRSC
	// A fused forward's epilogue: bias (not 0), z read when alpha2 is
	// not 0, ReLU when relu is set.
	bias, z uint64
	alpha2  float32
	relu    bool
}

// fakeNotSupportedDataType is the status cuDNN 9.19 returned on an H200
// for a fused forward's float bias on bfloat16 data:
// CUDNN_STATUS_NOT_SUPPORTED, detail 3.
const fakeNotSupportedDataType cuda.DNNStatus = 3003

// fakeWorkspace is the bytes the fake's good algorithm needs.
func fakeWorkspace(w *dnnTensor) uintptr { return uintptr(1024 + 4*w.n*w.c*w.h*w.w) }

// dnn is the fake cuDNN's table.
func (f *Fake) dnn() *cuda.DNNAPI {
	create := func(kind string) func(d *uintptr) cuda.DNNStatus {
		return func(d *uintptr) cuda.DNNStatus {
			f.mu.Lock()
			defer f.mu.Unlock()
			if d == nil {
				return cuda.DNNBadParam
			}
			*d = f.handle()
			f.descs[*d] = &dnnTensor{filter: kind == "filter"}
			f.descKinds[*d] = kind
			return 0
		}
	}
	destroy := func(kind string) func(d uintptr) cuda.DNNStatus {
		return func(d uintptr) cuda.DNNStatus {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.descKinds[d] != kind {
				return cuda.DNNBadParam
			}
			delete(f.descs, d)
			delete(f.descKinds, d)
			return 0
		}
	}
	// desc finds a descriptor of kind; the fake is locked.
	desc := func(d uintptr, kind string) *dnnTensor {
		if f.descKinds[d] != kind {
			return nil
		}
		return f.descs[d]
	}
	withDesc := func(d uintptr, kind string, do func(t *dnnTensor) cuda.DNNStatus) cuda.DNNStatus {
		f.mu.Lock()
		defer f.mu.Unlock()
		t := desc(d, kind)
		if t == nil {
			return cuda.DNNBadParam
		}
		return do(t)
	}
	// geometry checks the four descriptors of a product and returns its
	// geometry; the fake is locked.
	geometry := func(h cuda.DNNHandle, xd cuda.TensorDesc, wd cuda.FilterDesc, cd cuda.ConvDesc, yd cuda.TensorDesc) (gpuhost.ConvGeom, *dnnTensor, cuda.DNNStatus) {
		if f.dnnHandles[h] == nil {
			return gpuhost.ConvGeom{}, nil, cuda.DNNNotInitalized
		}
		x, w, c, y := desc(uintptr(xd), "tensor"), desc(uintptr(wd), "filter"), desc(uintptr(cd), "conv"), desc(uintptr(yd), "tensor")
		if x == nil || w == nil || c == nil || y == nil || !x.set || !w.set || !c.set || !y.set {
			return gpuhost.ConvGeom{}, nil, cuda.DNNBadParam
		}
		if x.format != y.format || w.format != x.format || x.format != cuda.DNNTensorNCHW && x.format != cuda.DNNTensorNHWC {
			return gpuhost.ConvGeom{}, nil, cuda.DNNNotSupported
		}
		if w.dtype != x.dtype || y.dtype != x.dtype {
			return gpuhost.ConvGeom{}, nil, cuda.DNNBadParam
		}
		if x.dtype != cuda.DNNDataFloat && x.dtype != cuda.DNNDataBFloat16 || c.mode != cuda.DNNCrossCorrelation || c.compute != cuda.DNNDataFloat {
			return gpuhost.ConvGeom{}, nil, cuda.DNNNotSupported
		}
		g := gpuhost.ConvGeom{N: x.n, C: x.c, H: x.h, W: x.w, OC: w.n, KH: w.h, KW: w.w, PH: c.pad[0], PW: c.pad[1],
			SH: c.stride[0], SW: c.stride[1], DH: c.dilate[0], DW: c.dilate[1], Groups: c.groups, OH: y.h, OW: y.w}
		if w.c*c.groups != x.c || y.n != x.n || y.c != w.n || g.Check() != nil {
			return gpuhost.ConvGeom{}, nil, cuda.DNNBadParam
		}
		return g, c, 0
	}
	algos := func(h cuda.DNNHandle, xd cuda.TensorDesc, wd cuda.FilterDesc, cd cuda.ConvDesc, yd cuda.TensorDesc, requested int32, returned *int32, perf *cuda.ConvAlgoPerf) cuda.DNNStatus {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.unsafeCall("cuDNN's algorithm heuristics") != cuda.Success {
			return cuda.DNNNotSupported
		}
		_, c, s := geometry(h, xd, wd, cd, yd)
		if s != 0 {
			return s
		}
		if returned == nil || perf == nil || requested < 1 {
			return cuda.DNNBadParam
		}
		ws := fakeWorkspace(desc(uintptr(wd), "filter"))
		out := []cuda.ConvAlgoPerf{
			{Algo: fakeAlgoRefused, Status: cuda.DNNNotSupported, MathType: c.math},
			{Algo: fakeAlgoTransform, Status: cuda.DNNSuccess, Memory: 2 * ws, Determinism: cuda.DNNDeterministic, MathType: c.math},
			{Algo: fakeAlgoHuge, Status: cuda.DNNSuccess, Memory: fakeHugeWorkspace, Determinism: cuda.DNNDeterministic, MathType: c.math},
			{Algo: fakeAlgoUnstable, Status: cuda.DNNSuccess, Memory: ws, MathType: c.math},
			{Algo: fakeAlgoGood, Status: cuda.DNNSuccess, Memory: ws, Determinism: cuda.DNNDeterministic, MathType: c.math},
		}
		n := min(int(requested), len(out))
		dst := unsafeSlice(perf, n)
		copy(dst, out[:n])
		*returned = int32(n)
		return 0
	}
	workspace := func(h cuda.DNNHandle, xd cuda.TensorDesc, wd cuda.FilterDesc, cd cuda.ConvDesc, yd cuda.TensorDesc, algo int32, bytes *uintptr) cuda.DNNStatus {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.unsafeCall("cuDNN's workspace query") != cuda.Success {
			return cuda.DNNNotSupported
		}
		if _, _, s := geometry(h, xd, wd, cd, yd); s != 0 {
			return s
		}
		need, s := fakeAlgoWorkspace(algo, desc(uintptr(wd), "filter"))
		if bytes == nil || s != 0 {
			return max(s, cuda.DNNBadParam)
		}
		*bytes = need
		return 0
	}
	// product checks and makes one call of product p; a fused forward's
	// edit sets its epilogue (nil for the three plain products).
	product := func(p gpuhost.ConvProduct, h cuda.DNNHandle, alpha *float32, xd cuda.TensorDesc, x cuda.DevicePtr, wd cuda.FilterDesc, w cuda.DevicePtr,
		cd cuda.ConvDesc, algo int32, ws cuda.DevicePtr, wsBytes uintptr, beta *float32, yd cuda.TensorDesc, y cuda.DevicePtr, edit func(c *convCall)) cuda.DNNStatus {
		defer f.mu.Unlock()
		if r := f.enter(true); r != 0 {
			return cuda.DNNExecFailed
		}
		g, c, s := geometry(h, xd, wd, cd, yd)
		if s != 0 {
			return s
		}
		need, as := fakeAlgoWorkspace(algo, desc(uintptr(wd), "filter"))
		if as != 0 {
			return as
		}
		if alpha == nil || beta == nil || wsBytes < need || need > 0 && f.find(uint64(ws), uint64(need)) == nil {
			return cuda.DNNBadParam
		}
		if r := f.refuseAlgo[algo]; r != nil {
			if r.pass <= 0 {
				return r.status
			}
			r.pass--
		}
		f.convAlgos[algo]++
		call := &convCall{delay: f.opts.ConvAlgoDelay[algo], g: g, product: p, x: uint64(x), w: uint64(w), y: uint64(y), alpha: *alpha, beta: *beta, precision: gpuhost.PrecisionTF32,
			nhwc: desc(uintptr(xd), "tensor").format == cuda.DNNTensorNHWC}
		switch {
		case desc(uintptr(xd), "tensor").dtype == cuda.DNNDataBFloat16:
			// Rounding a bfloat16 value to bfloat16 (or TF32) keeps it.
			call.precision, call.bf16 = gpuhost.PrecisionBF16, true
		case c.math == cuda.DNNFMAMath:
			call.precision = gpuhost.PrecisionF32
		}
		if edit != nil {
			edit(call)
		}
		st := f.streams[f.dnnHandles[h].stream]
		if st != nil && st.capturing {
			st.ops = append(st.ops, op{conv: call})
			return 0
		}
		f.awaitAsync(st)
		f.stats.Convs++
		f.execute(op{conv: call})
		return 0
	}
	fused := func(h cuda.DNNHandle, alpha1 *float32, xd cuda.TensorDesc, x cuda.DevicePtr, wd cuda.FilterDesc, w cuda.DevicePtr, cd cuda.ConvDesc,
		algo int32, ws cuda.DevicePtr, wsBytes uintptr, alpha2 *float32, zd cuda.TensorDesc, z cuda.DevicePtr, bd cuda.TensorDesc, bias cuda.DevicePtr,
		ad cuda.ActivationDesc, yd cuda.TensorDesc, y cuda.DevicePtr) cuda.DNNStatus {
		// The epilogue's own checks, then the forward's (product), which
		// records or runs the call with the epilogue set by edit.
		f.mu.Lock()
		var s cuda.DNNStatus
		var relu bool
		func() {
			defer f.mu.Unlock()
			if f.dnnHandles[h] == nil {
				s = cuda.DNNNotInitalized
				return
			}
			xt, yt, zt, bt, at := desc(uintptr(xd), "tensor"), desc(uintptr(yd), "tensor"), desc(uintptr(zd), "tensor"), desc(uintptr(bd), "tensor"), desc(uintptr(ad), "activation")
			switch {
			case xt == nil || yt == nil || zt == nil || bt == nil || at == nil || !xt.set || !yt.set || !zt.set || !bt.set || !at.set || alpha2 == nil:
				s = cuda.DNNBadParam
			case zt.format != yt.format || zt.dtype != yt.dtype || zt.n != yt.n || zt.c != yt.c || zt.h != yt.h || zt.w != yt.w:
				s = cuda.DNNBadParam
			case bt.n != 1 || bt.c != yt.c || bt.h != 1 || bt.w != 1:
				s = cuda.DNNBadParam
			case bt.dtype != xt.dtype:
				s = fakeNotSupportedDataType
			case at.act != cuda.DNNActivationReLU && at.act != cuda.DNNActivationIdentity:
				s = cuda.DNNNotSupported
			case at.act == cuda.DNNActivationIdentity && algo != cuda.DNNFwdAlgoImplicitPrecompGemm:
				s = fakeNotSupportedDataType
			}
			relu = at != nil && at.act == cuda.DNNActivationReLU
		}()
		if s != 0 {
			return s
		}
		zero := float32(0)
		return product(gpuhost.ConvForward, h, alpha1, xd, x, wd, w, cd, algo, ws, wsBytes, &zero, yd, y, func(c *convCall) {
			c.bias, c.z, c.alpha2, c.relu = uint64(bias), uint64(z), *alpha2, relu
		})
	}
	return &cuda.DNNAPI{
		GetVersion: func() uintptr { return 91000 },
		GetErrorString: func(s cuda.DNNStatus) string {
			switch s / 1000 * 1000 {
			case 0:
				return "CUDNN_STATUS_SUCCESS"
			case 1000:
				return "CUDNN_STATUS_NOT_INITIALIZED"
			case 2000:
				return "CUDNN_STATUS_BAD_PARAM"
			case 3000:
				return "CUDNN_STATUS_NOT_SUPPORTED"
			}
			return "CUDNN_STATUS_INTERNAL_ERROR"
		},
		Create: func(h *cuda.DNNHandle) cuda.DNNStatus {
			defer f.mu.Unlock()
			if r := f.enter(true); r != 0 {
				return cuda.DNNNotInitalized
			}
			if f.unsafeCall("cudnnCreate") != cuda.Success {
				return cuda.DNNNotSupported
			}
			*h = cuda.DNNHandle(f.handle())
			f.dnnHandles[*h] = &dnnHandle{}
			return 0
		},
		Destroy: func(h cuda.DNNHandle) cuda.DNNStatus {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.dnnHandles[h] == nil {
				return cuda.DNNNotInitalized
			}
			if f.unsafeCall("cudnnDestroy") != cuda.Success {
				return cuda.DNNNotSupported
			}
			delete(f.dnnHandles, h)
			return 0
		},
		SetStream: func(h cuda.DNNHandle, s cuda.Stream) cuda.DNNStatus {
			f.mu.Lock()
			defer f.mu.Unlock()
			dh := f.dnnHandles[h]
			if dh == nil {
				return cuda.DNNNotInitalized
			}
			if s != 0 && f.streams[s] == nil {
				return cuda.DNNBadParam
			}
			dh.stream = s
			return 0
		},
		CreateTensor:  func(d *cuda.TensorDesc) cuda.DNNStatus { return create("tensor")((*uintptr)(d)) },
		DestroyTensor: func(d cuda.TensorDesc) cuda.DNNStatus { return destroy("tensor")(uintptr(d)) },
		CreateFilter:  func(d *cuda.FilterDesc) cuda.DNNStatus { return create("filter")((*uintptr)(d)) },
		DestroyFilter: func(d cuda.FilterDesc) cuda.DNNStatus { return destroy("filter")(uintptr(d)) },
		CreateConv:    func(d *cuda.ConvDesc) cuda.DNNStatus { return create("conv")((*uintptr)(d)) },
		DestroyConv:   func(d cuda.ConvDesc) cuda.DNNStatus { return destroy("conv")(uintptr(d)) },
		CreateActivation: func(d *cuda.ActivationDesc) cuda.DNNStatus {
			return create("activation")((*uintptr)(d))
		},
		DestroyActivation: func(d cuda.ActivationDesc) cuda.DNNStatus { return destroy("activation")(uintptr(d)) },
		SetActivation: func(d cuda.ActivationDesc, mode, nanOpt int32, coef float64) cuda.DNNStatus {
			return withDesc(uintptr(d), "activation", func(t *dnnTensor) cuda.DNNStatus {
				// cudnnActivationMode_t runs from SIGMOID (0) to
				// SWISH (6); cudnnNanPropagation_t is 0 or 1.
				if mode < 0 || mode > 6 || nanOpt < 0 || nanOpt > 1 || coef != coef {
					return cuda.DNNBadParam
				}
				t.set, t.act = true, mode
				return 0
			})
		},
		BiasActivationForward: fused,
		SetConvMath: func(d cuda.ConvDesc, m int32) cuda.DNNStatus {
			return withDesc(uintptr(d), "conv", func(t *dnnTensor) cuda.DNNStatus {
				if m < cuda.DNNDefaultMath || m > cuda.DNNFMAMath {
					return cuda.DNNBadParam
				}
				t.math = m
				return 0
			})
		},
		SetConvGroups: func(d cuda.ConvDesc, groups int32) cuda.DNNStatus {
			return withDesc(uintptr(d), "conv", func(t *dnnTensor) cuda.DNNStatus {
				if groups < 1 {
					return cuda.DNNBadParam
				}
				t.groups = int(groups)
				return 0
			})
		},
		SetTensor4d: func(d cuda.TensorDesc, format, dtype, n, c, h, w int32) cuda.DNNStatus {
			return withDesc(uintptr(d), "tensor", func(t *dnnTensor) cuda.DNNStatus {
				if n < 1 || c < 1 || h < 1 || w < 1 || format < 0 || format > 2 {
					return cuda.DNNBadParam
				}
				t.set, t.format, t.dtype, t.n, t.c, t.h, t.w = true, format, dtype, int(n), int(c), int(h), int(w)
				return 0
			})
		},
		SetFilter4d: func(d cuda.FilterDesc, dtype, format, k, c, h, w int32) cuda.DNNStatus {
			return withDesc(uintptr(d), "filter", func(t *dnnTensor) cuda.DNNStatus {
				if k < 1 || c < 1 || h < 1 || w < 1 || format < 0 || format > 2 {
					return cuda.DNNBadParam
				}
				t.set, t.format, t.dtype, t.n, t.c, t.h, t.w = true, format, dtype, int(k), int(c), int(h), int(w)
				return 0
			})
		},
		SetConv2d: func(d cuda.ConvDesc, ph, pw, sh, sw, dh, dw, mode, compute int32) cuda.DNNStatus {
			return withDesc(uintptr(d), "conv", func(t *dnnTensor) cuda.DNNStatus {
				if ph < 0 || pw < 0 || sh < 1 || sw < 1 || dh < 1 || dw < 1 || mode < 0 || mode > 1 {
					return cuda.DNNBadParam
				}
				t.set, t.pad, t.stride, t.dilate, t.mode, t.compute = true, [2]int{int(ph), int(pw)}, [2]int{int(sh), int(sw)}, [2]int{int(dh), int(dw)}, mode, compute
				if t.groups == 0 {
					t.groups = 1
				}
				return 0
			})
		},
		FwdAlgo: func(h cuda.DNNHandle, x cuda.TensorDesc, w cuda.FilterDesc, c cuda.ConvDesc, y cuda.TensorDesc, req int32, ret *int32, perf *cuda.ConvAlgoPerf) cuda.DNNStatus {
			return algos(h, x, w, c, y, req, ret, perf)
		},
		BwdDataAlgo: func(h cuda.DNNHandle, w cuda.FilterDesc, dy cuda.TensorDesc, c cuda.ConvDesc, dx cuda.TensorDesc, req int32, ret *int32, perf *cuda.ConvAlgoPerf) cuda.DNNStatus {
			return algos(h, dx, w, c, dy, req, ret, perf)
		},
		BwdFilterAlgo: func(h cuda.DNNHandle, x cuda.TensorDesc, dy cuda.TensorDesc, c cuda.ConvDesc, dw cuda.FilterDesc, req int32, ret *int32, perf *cuda.ConvAlgoPerf) cuda.DNNStatus {
			return algos(h, x, dw, c, dy, req, ret, perf)
		},
		FwdWorkspace: func(h cuda.DNNHandle, x cuda.TensorDesc, w cuda.FilterDesc, c cuda.ConvDesc, y cuda.TensorDesc, algo int32, n *uintptr) cuda.DNNStatus {
			return workspace(h, x, w, c, y, algo, n)
		},
		BwdDataWorkspace: func(h cuda.DNNHandle, w cuda.FilterDesc, dy cuda.TensorDesc, c cuda.ConvDesc, dx cuda.TensorDesc, algo int32, n *uintptr) cuda.DNNStatus {
			return workspace(h, dx, w, c, dy, algo, n)
		},
		BwdFilterWorkspace: func(h cuda.DNNHandle, x cuda.TensorDesc, dy cuda.TensorDesc, c cuda.ConvDesc, dw cuda.FilterDesc, algo int32, n *uintptr) cuda.DNNStatus {
			return workspace(h, x, dw, c, dy, algo, n)
		},
		Forward: func(h cuda.DNNHandle, alpha *float32, xd cuda.TensorDesc, x cuda.DevicePtr, wd cuda.FilterDesc, w cuda.DevicePtr, cd cuda.ConvDesc,
			algo int32, ws cuda.DevicePtr, wsBytes uintptr, beta *float32, yd cuda.TensorDesc, y cuda.DevicePtr) cuda.DNNStatus {
			return product(gpuhost.ConvForward, h, alpha, xd, x, wd, w, cd, algo, ws, wsBytes, beta, yd, y, nil)
		},
		BackwardData: func(h cuda.DNNHandle, alpha *float32, wd cuda.FilterDesc, w cuda.DevicePtr, dyd cuda.TensorDesc, dy cuda.DevicePtr, cd cuda.ConvDesc,
			algo int32, ws cuda.DevicePtr, wsBytes uintptr, beta *float32, dxd cuda.TensorDesc, dx cuda.DevicePtr) cuda.DNNStatus {
			return product(gpuhost.ConvInputGrad, h, alpha, dxd, dx, wd, w, cd, algo, ws, wsBytes, beta, dyd, dy, nil)
		},
		BackwardFilter: func(h cuda.DNNHandle, alpha *float32, xd cuda.TensorDesc, x cuda.DevicePtr, dyd cuda.TensorDesc, dy cuda.DevicePtr, cd cuda.ConvDesc,
			algo int32, ws cuda.DevicePtr, wsBytes uintptr, beta *float32, dwd cuda.FilterDesc, dw cuda.DevicePtr) cuda.DNNStatus {
			return product(gpuhost.ConvWeightGrad, h, alpha, xd, x, dwd, dw, cd, algo, ws, wsBytes, beta, dyd, dy, nil)
		},
	}
}

// fakeAlgoWorkspace is the workspace of one of the fake's algorithms for
// filter w, or the status of an algorithm it does not run.
func fakeAlgoWorkspace(algo int32, w *dnnTensor) (uintptr, cuda.DNNStatus) {
	switch algo {
	case fakeAlgoGood, fakeAlgoUnstable:
		return fakeWorkspace(w), 0
	case fakeAlgoTransform:
		return 2 * fakeWorkspace(w), 0
	case fakeAlgoHuge:
		return fakeHugeWorkspace, 0
	case fakeAlgoRefused:
		return 0, cuda.DNNNotSupported
	}
	return 0, cuda.DNNBadParam
}

// ConvAlgorithms counts the cuDNN calls made with each algorithm (the
// calls, captured or not; a graph's replays are not counted again).
func (f *Fake) ConvAlgorithms() map[int32]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.convAlgos)
}

// unsafeSlice is n values from p.
func unsafeSlice(p *cuda.ConvAlgoPerf, n int) []cuda.ConvAlgoPerf { return unsafe.Slice(p, n) }

// runConv computes one product on the simulated memory; a tensor outside
// the live allocations faults as a kernel would. Float tensors are the
// memory itself; bfloat16 ones are decoded copies, and the output is
// encoded back, rounded, at the end. X, Y and W are indexed through
// their layout's strides (convStrides): NCHW and KCRS, or NHWC and KRSC.
func (f *Fake) runConv(c *convCall) {
	time.Sleep(c.delay)
	g := c.g
	xn, wn, yn := g.Sizes()
	read := f.floats
	if c.bf16 {
		read = f.bf16s
	}
	X, W, Y := read("cuDNN x", c.x, xn), read("cuDNN w", c.w, wn), read("cuDNN y", c.y, yn)
	if X == nil || W == nil || Y == nil {
		return
	}
	// A fused forward's bias, and its z where alpha2 is not 0 (copies:
	// z may be y).
	var B, Z []float32
	if c.bias != 0 {
		if B = read("cuDNN bias", c.bias, g.OC); B == nil {
			return
		}
		if c.alpha2 != 0 {
			if Z = read("cuDNN z", c.z, yn); Z == nil {
				return
			}
			Z = append([]float32(nil), Z...)
		}
	}
	// The operands as the math reads them (copies: the inputs stay).
	round := func(v []float32) []float32 {
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = c.precision.Round(x)
		}
		return out
	}
	var out []float32
	var outAt uint64
	var rx, rw, ry []float32
	switch c.product {
	case gpuhost.ConvForward:
		out, outAt, rx, rw, ry = Y, c.y, round(X), round(W), make([]float32, len(Y))
	case gpuhost.ConvInputGrad:
		out, outAt, rx, rw, ry = X, c.x, make([]float32, len(X)), round(W), round(Y)
	default:
		out, outAt, rx, rw, ry = W, c.w, round(X), make([]float32, len(W)), round(Y)
	}
	acc := make([]float64, len(out))
	cg, ocg := g.C/g.Groups, g.OC/g.Groups
	xs, ys := convStrides(c.nhwc, g.C, g.H, g.W), convStrides(c.nhwc, g.OC, g.OH, g.OW)
	ws := convStrides(c.nhwc, cg, g.KH, g.KW)
	for n := range g.N {
		for o := range g.OC {
			gi := o / ocg
			for i := range g.OH {
				for j := range g.OW {
					yi := n*ys[0] + o*ys[1] + i*ys[2] + j*ys[3]
					for c0 := range cg {
						ci := gi*cg + c0
						for kh := range g.KH {
							h := i*g.SH - g.PH + kh*g.DH
							if h < 0 || h >= g.H {
								continue
							}
							for kw := range g.KW {
								w := j*g.SW - g.PW + kw*g.DW
								if w < 0 || w >= g.W {
									continue
								}
								xi := n*xs[0] + ci*xs[1] + h*xs[2] + w*xs[3]
								wi := o*ws[0] + c0*ws[1] + kh*ws[2] + kw*ws[3]
								switch c.product {
								case gpuhost.ConvForward:
									acc[yi] += float64(rx[xi]) * float64(rw[wi])
								case gpuhost.ConvInputGrad:
									acc[xi] += float64(ry[yi]) * float64(rw[wi])
								default:
									acc[wi] += float64(ry[yi]) * float64(rx[xi])
								}
							}
						}
					}
				}
			}
		}
	}
	for i := range out {
		v := c.alpha * float32(acc[i])
		if c.beta != 0 {
			v += c.beta * out[i]
		}
		if B != nil {
			if Z != nil {
				v += c.alpha2 * Z[i]
			}
			ch := i / (g.OH * g.OW) % g.OC // NCHW
			if c.nhwc {
				ch = i % g.OC
			}
			v += B[ch]
			if c.relu && v < 0 {
				v = 0
			}
		}
		out[i] = v
	}
	if c.bf16 {
		b := f.bytesAt(outAt, uint64(2*len(out)))
		for i, v := range out {
			binary.LittleEndian.PutUint16(b[2*i:], gpuhost.BF16Bits(v))
		}
	}
	f.stats.ConvRuns++
}

// convStrides are the element strides of a packed tensor's n, c, h and
// w indices, of c channels h×w: NCHW's, or channels-last (nhwc) ones; a
// filter's k, c, r and s likewise (KCRS, or KRSC when nhwc).
func convStrides(nhwc bool, c, h, w int) [4]int {
	if nhwc {
		return [4]int{h * w * c, 1, w * c, c}
	}
	return [4]int{c * h * w, h * w, w, 1}
}
