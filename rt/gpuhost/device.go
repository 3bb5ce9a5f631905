package gpuhost

import "fmt"

// Device is what the GPU host program needs from a GPU: memory, a kernel
// library, and recorded sequences of kernel launches and GEMMs. The Metal
// device (package mps) and the CUDA device (package cuda) implement it, and
// so do their fakes; one conformance suite (gpuhosttest) holds them all to
// the same contract.
//
// The memory contract. Every buffer lives on the device. A device whose
// memory the host shares (Apple GPUs, the fakes) returns the buffer's bytes
// from HostView, and the host program then reads and writes them in place;
// a discrete GPU returns nil and the host program keeps its own copy,
// moving it with Upload and Download only at phase boundaries (before a
// sequence that reads what the host wrote, after one whose results the host
// reads). Upload and Download first wait for every launched sequence, so
// they never race the GPU.
//
// The step contract. A Sequence is recorded once (Record calls encode with
// an Encoder that takes the ops in order) and launched any number of times;
// Launch only enqueues, and Sync waits for everything launched, reporting
// the first failure with the name of its sequence. A CUDA device captures a
// sequence as one CUDA graph; Metal encodes it into one command buffer per
// launch. Values that change between launches (learning rate, step count,
// dropout seed, batch position) live in device buffers that kernels read,
// never in the recorded ops.
type Device interface {
	// Name is the GPU's name, e.g. "NVIDIA H100 80GB HBM3".
	Name() string
	// Facts are the lines `info` prints about the device: libraries loaded
	// and their versions, memory, architecture.
	Facts() []Fact
	// Alloc returns a zeroed buffer of n bytes; label names it in errors.
	Alloc(label string, n int) (Buffer, error)
	// Free releases a buffer that no recorded sequence uses.
	Free(b Buffer) error
	// HostView is b's memory as bytes when the host shares it, else nil.
	HostView(b Buffer) []byte
	// Upload copies src to b at byte offset off; Download copies from b at
	// off into dst. Both wait for launched sequences first.
	Upload(b Buffer, off int, src []byte) error
	Download(dst []byte, b Buffer, off int) error
	// LoadKernels compiles the program's kernel source (in the device's
	// language) and finds every kernel named in kernels, so that a compile
	// error or a missing kernel shows before any work.
	LoadKernels(source string, kernels []KernelInfo) error
	// Record records the ops encode adds as one sequence named name.
	// encode may be called more than once (the CUDA device first runs it
	// to prepare its library convolutions outside the capture), so it
	// must add the same ops each time and do nothing else.
	Record(name string, encode func(Encoder) error) (Sequence, error)
	// Sync waits for every launched sequence.
	Sync() error
	// Close releases everything the device holds.
	Close() error
}

// MemoryReporter is a Device that can say how many bytes of its memory
// are free, so that New refuses a model too large for the GPU before it
// allocates, with what each arena needs and what to change, rather than
// failing on one allocation (CUDA: cuMemGetInfo; the fake: its Memory).
type MemoryReporter interface {
	FreeMemory() (int64, error)
}

// Pinner is a discrete GPU's Device whose copies run faster from
// page-locked host memory: Pin locks b until the device closes (b stays
// valid memory afterwards). The host program pins what a latency-bound
// call copies every time: the staged inference inputs.
type Pinner interface {
	Pin(b []byte) error
}

// Caller is a discrete GPU's Device that runs a sequence between copies as
// one call with one wait: the copies in go up, the sequence runs, the
// copies out come back, all queued at once. The host program runs an
// inference this way instead of an Upload, a Launch, a Sync and a
// Download, each of which waits. Call first waits for nothing more than
// Upload would (the device's queue keeps the order), and reports a failure
// as Sync does.
type Caller interface {
	Call(seq Sequence, in, out []Transfer) error
}

// Transfer is one copy between host memory and a buffer: len(Host) bytes
// at byte offset Off of Buf.
type Transfer struct {
	Buf  Buffer
	Off  int
	Host []byte
}

// Fact is one line of `info`.
type Fact struct{ Key, Value string }

// Buffer is a device allocation.
type Buffer interface {
	// Len is its size in bytes.
	Len() int
}

// KernelInfo names one kernel of the program's source and the bytes each
// of its buffer arguments touches, so a device can check every binding.
type KernelInfo struct {
	Name     string
	ArgBytes []int
}

// Arg is one buffer argument of a kernel launch: Bytes bytes of Buf from
// byte Offset.
type Arg struct {
	Buf           Buffer
	Offset, Bytes int
}

// Operand is a row-major GEMM matrix of Elem elements: rows of RowBytes
// bytes in Buf from byte Offset (RowBytes 0: packed rows). In a batched
// GEMM, matrix i starts MatrixBytes·i bytes after the first. Offsets and
// strides are byte counts whatever the element type, and multiples of
// its size.
type Operand struct {
	Buf                           Buffer
	Offset, RowBytes, MatrixBytes int
	Elem                          Elem
}

// Elem is the element type of a GEMM operand in memory. The zero value is
// float32.
type Elem uint8

// The element types of GEMM operands.
const (
	// ElemF32 is float32, 4 bytes an element: every C, and A and B unless
	// their producers wrote bfloat16 for the GEMM.
	ElemF32 Elem = iota
	// ElemBF16 is bfloat16, 2 bytes an element: the top 16 bits of the
	// float32 the producing kernel rounded (to nearest, ties to even).
	ElemBF16
	elemCount
)

var elemNames = [elemCount]string{"float32", "bfloat16"}

// String names e as errors and plans say it ("float32", "bfloat16").
func (e Elem) String() string {
	if e < elemCount {
		return elemNames[e]
	}
	return "unknown element type"
}

// Size is the bytes of one element of e (0 for an unknown type).
func (e Elem) Size() int {
	switch e {
	case ElemF32:
		return 4
	case ElemBF16:
		return 2
	}
	return 0
}

// Gemm is C = Alpha·op(A)·op(B) + Beta·C in row-major float32, with op(X)
// = Xᵀ when the flag is set; C is M×N and the inner dimension is K. With
// Batch above 1 it is Batch such products, the i-th on the operands'
// i-th matrices (Operand.MatrixBytes apart): one strided batched GEMM.
//
// Precision is the arithmetic of the products. A device computes
// PrecisionF32 exactly as float32 products summed in float32; for another
// precision it either computes exactly that precision (each element of A
// and B rounded as Precision.Round does, products summed in float32: the
// conformance suite compares with that reference and checks the result
// differs from the exact float32 one) or refuses the GEMM with an error
// when it is encoded. It never silently multiplies in another precision.
//
// The operands' element types. C is float32. A and B are both float32, or
// both bfloat16 (ElemBF16: the producers wrote them rounded, and the GEMM
// reads half the bytes) with Precision PrecisionBF16, whose products of
// bfloat16 values are what the device computes then, summed in float32.
// A device that cannot read bfloat16 operands, or any other combination
// (A and B of different types, a bfloat16 C, bfloat16 operands in another
// precision), refuses the GEMM with an error when it is encoded; the
// planner asks for bfloat16 operands only where its Target says the
// backend reads them.
type Gemm struct {
	TransA, TransB bool
	M, N, K        int
	Batch          int // 0 or 1: one product
	Alpha, Beta    float32
	A, B, C        Operand
	Precision      Precision
}

// Conv is one product of a 2-D convolution, computed by the device's
// convolution library (cuDNN on CUDA), on packed row-major (NCHW, or
// with NHWC channels-last, below) tensors of three shapes: X
// [N, C, H, W], W [OC, C/Groups, KH, KW] and
// Y [N, OC, OH, OW], where Geom gives OH and OW and they agree with the
// window (ConvGeom.Check). Product says which tensor is written from the
// other two:
//
//   - ConvForward: Y = Alpha·conv(X, W) + Beta·Y, the cross-correlation
//     y[n,o,i,j] = Σ x[n, g·C/G+c, i·SH−PH+kh·DH, j·SW−PW+kw·DW]·w[o,c,kh,kw]
//     over c, kh, kw (g the group of output channel o; positions outside
//     the image read 0);
//   - ConvInputGrad: X = Alpha·convᵀ(Y, W) + Beta·X, the input gradient:
//     each x gets the sum of y·w over every (output, tap) that read it;
//   - ConvWeightGrad: W = Alpha·corr(X, Y) + Beta·W, the weight gradient:
//     w[o,c,kh,kw] = Σ y[n,o,i,j]·x[n, g·C/G+c, …] over n, i, j.
//
// Beta 0 overwrites the output without reading it; Beta 1 adds to it (a
// gradient summed over several uses).
//
// Precision is the arithmetic of the products, under Gemm's rule: a
// device computes PrecisionF32 as float32 products summed in float32 (no
// TF32 tensor cores), and another precision exactly (the operands
// rounded as Precision.Round does, products summed in float32) or
// refuses the Conv when it is encoded; never silently another.
//
// The tensors' element types. X, W and Y are all float32 (ElemF32), in
// precision f32 or tf32, or all bfloat16 (ElemBF16: packed, 2 bytes an
// element, the top half of the float32 their producers rounded) with
// Precision PrecisionBF16: the products of the stored bfloat16 values
// are what the device computes then, summed in float32, and the output
// is Alpha·product + Beta·output computed in float32 (Beta not 0 reads
// the old output as bfloat16, and may round Alpha·product to bfloat16
// before adding, as cuDNN's input gradient does on an H200) and stored
// rounded to bfloat16 (to nearest, ties to even). A device that cannot read bfloat16 tensors,
// or any other combination (tensors of different types, bfloat16
// tensors in another precision, float32 tensors in precision bf16),
// refuses the Conv with an error when it is encoded (Conv.Check).
//
// The layout. With NHWC set, all three tensors are stored channels-last,
// packed: X [N, H, W, C] and Y [N, OH, OW, OC], element (n, c, h, w) of
// X at ((n·H + h)·W + w)·C + c and its twin for Y, and W
// [OC, KH, KW, C/Groups] (KRSC), element (o, c, kh, kw) at
// ((o·KH + kh)·KW + kw)·(C/Groups) + c: the channels-last form of the
// tensor [OC, C/Groups, KH·KW], as WidenBF16NHWC and NarrowBF16NHWC take
// it. The filter follows the activations because cuDNN does: it offers
// no input- or weight-gradient algorithm for channels-last activations
// with a KCRS filter. The products, precisions, element types and sizes
// in bytes are those above, whatever the layout. A device that cannot
// read channels-last tensors refuses a Conv with NHWC set, naming it,
// when it is encoded (Conv.Check).
//
// The epilogue. A forward may fold what follows it into the same call
// (cuDNN's cudnnConvolutionBiasActivationForward): with Bias set (its
// Buf not nil) it computes
//
//	y[n,o,i,j] = act(Alpha·conv(X, W)[n,o,i,j] + z[n,o,i,j] + bias[o])
//
// where Bias is OC values of Y's element type, one per output channel
// (bfloat16 in bf16: cuDNN takes no float bias on bfloat16 data), Z,
// when set, a tensor of Y's shape, layout and element type (a residual
// added before the activation; 0 when its Buf is nil), and act is Act
// (ConvActNone: none; ConvActReLU: max(v, 0)), applied last. Z and Act
// need Bias (a bias of zeros where there is none), an epilogue is a
// ConvForward's with Beta 0, and Z does not overlap Y. The sum is of the
// stored values in float32 and stored rounded to Y's element type; a
// device may first round Alpha·conv, and Alpha·conv + Z, to Y's type (as
// cuDNN may), so a bfloat16 y may differ from the float64 value by
// 2⁻⁸·(|Alpha·conv| + |Alpha·conv + Z| + |y|) (half a bfloat16 unit of
// each rounded value) plus float32's summation error, and a float32 y by
// float32's summation error. A device whose ConvSupport lacks Epilogue,
// and every device for an epilogue on another product, with Beta not 0,
// Z or Act without Bias, a Bias or Z of another element type than Y's,
// or an Act it does not know, refuses the Conv when it is encoded
// (Conv.Check).
//
// A device without library convolutions (Metal's) refuses every Conv:
// the planner asks for them, and for bfloat16, channels-last or fused
// ones, only where its Target says the backend has them.
type Conv struct {
	Geom      ConvGeom
	Product   ConvProduct
	X, W, Y   Tensor
	Alpha     float32
	Beta      float32
	Precision Precision
	NHWC      bool    // X and Y channels-last (NHWC) and W KRSC; else NCHW and KCRS
	Bias      Tensor  // epilogue: OC values of Y's element type, one per output channel; Buf nil: none
	Z         Tensor  // epilogue: a tensor of Y's shape, layout and element type; Buf nil: none
	Act       ConvAct // epilogue: applied last
}

// Tensor is a packed tensor of a Conv: its first element at byte Offset
// of Buf, of type Elem (Offset a multiple of its size); its shape is the
// Conv's (Bias: OC elements; Z: Y's).
type Tensor struct {
	Buf    Buffer
	Offset int
	Elem   Elem
}

// Encoder takes the ops of a sequence being recorded, in order.
type Encoder interface {
	// Dispatch launches kernel as groups threadgroups (blocks) of threads
	// threads each, with one Arg per buffer parameter.
	Dispatch(kernel string, args []Arg, groups, threads int) error
	Gemm(g Gemm) error
	// Conv adds one library convolution (Conv's contract); a device
	// without one refuses it with an error that says so.
	Conv(c Conv) error
}

// Sequence is a recorded sequence of ops.
type Sequence interface {
	// Launch enqueues one run of the sequence and returns without waiting;
	// an error the GPU reports later comes from Sync.
	Launch() error
}

// CheckElems checks g's operand element types against the contract of
// Gemm, for a device that reads bfloat16 operands (readsBF16) or not, and
// returns an error that says which operand is of which type, or nil.
func (g *Gemm) CheckElems(readsBF16 bool) error {
	for _, o := range []struct {
		name string
		e    Elem
	}{{"A", g.A.Elem}, {"B", g.B.Elem}, {"C", g.C.Elem}} {
		if o.e.Size() == 0 {
			return fmt.Errorf("operand %s has element type %d, which is none of float32 and bfloat16", o.name, o.e)
		}
	}
	switch {
	case g.C.Elem != ElemF32:
		return fmt.Errorf("operand C is %v: a GEMM writes float32", g.C.Elem)
	case g.A.Elem != g.B.Elem:
		return fmt.Errorf("operand A is %v and B %v: both must be float32 or both bfloat16", g.A.Elem, g.B.Elem)
	case g.A.Elem == ElemBF16 && !readsBF16:
		return fmt.Errorf("operands A and B are bfloat16, which this device does not read (its GEMMs take float32 matrices)")
	case g.A.Elem == ElemBF16 && g.Precision != PrecisionBF16:
		return fmt.Errorf("bfloat16 operands A and B in precision %v: bfloat16 operands are multiplied in precision bf16", g.Precision)
	}
	return nil
}
