package gpu

import "fmt"

// Dialect is everything that differs between C-family GPU languages, as
// data: a new language is a new value, not a new printer. Format strings use
// explicit argument indexes so a dialect may reorder or drop arguments.
type Dialect struct {
	Name string
	// Header is printed once at the top of a source file.
	Header string
	// KernelDecl declares a kernel function; %[1]s is its name.
	KernelDecl string
	// ConstBuffer and MutableBuffer declare a buffer parameter:
	// %[1]s element type, %[2]s name, %[3]d binding index.
	ConstBuffer, MutableBuffer string
	// BuiltinParams are extra parameters after the buffers through which
	// the language passes thread coordinates (Metal's attributes).
	BuiltinParams []string
	// Builtins spells each thread coordinate as an int expression.
	Builtins map[BuiltinKind]string
	// Types spells each scalar type.
	Types map[Type]string
	// SharedArray declares a threadgroup float array: %[1]s name, %[2]d size.
	SharedArray string
	// Barrier is the threadgroup barrier statement.
	Barrier string
	// Funcs spells each math function; a function without an entry is
	// rewritten in terms of others by Rewrite before printing.
	Funcs map[Func]string
	// FloatSuffix follows every float literal.
	FloatSuffix string
	// Load4 declares a 16-byte vector %[1]s read from &%[2]s[%[3]s], whose
	// lanes the printer then names .x .y .z .w; Store4 writes the four
	// values %[3]s … %[6]s to &%[1]s[%[2]s]. Empty: the language has no
	// such access, and Rewrite splits Load4 and Store4 into scalar ones.
	Load4, Store4 string
	// StoreBF16 writes the float %[3]s rounded to bfloat16 (to nearest,
	// ties to even, NaN kept and quieted) into %[1]s[%[2]s] of a 16-bit
	// buffer, as one statement of integer bit arithmetic; LoadBF16 reads
	// %[1]s[%[2]s] of one as a float. Types[BF16] spells its element.
	StoreBF16, LoadBF16 string
	// Load4BF16 declares an 8-byte vector %[1]s read from &%[2]s[%[3]s]
	// of a 16-bit buffer, and BF16Lanes[i] reads lane i of vector %[1]s
	// as a float; Store4BF16 writes the floats %[3]s … %[6]s, each
	// rounded as StoreBF16 rounds, to &%[1]s[%[2]s] as one 8-byte
	// access. Empty: Rewrite splits Load4BF16 and Store4BF16 into scalar
	// ones.
	Load4BF16, Store4BF16 string
	BF16Lanes             [4]string
	// MaxBuffers is the most buffers one kernel may bind (0: no limit that
	// generated kernels reach).
	MaxBuffers int
	// MaxSharedBytes is the threadgroup memory one kernel may declare
	// (SharedArray), less room for what the compiler adds; the fused
	// attention's tiles are sized to it.
	MaxSharedBytes int
	// AttentionBlocks names the fused attention's block policy
	// (kernels_attention.go's attnPolicies), chosen by measurement on the
	// language's GPUs where there was one.
	AttentionBlocks string
	// Tiles is the language's cooperative matrix product (ir.go's tile
	// statements), nil where it has none that the generators use: their
	// kernels then multiply on the threads alone.
	Tiles *TileDialect
	// Fragments is the language's warp-wide matrix product on register
	// fragments (ir.go's fragment statements), nil where it has none:
	// the fused attention of a bf16 plan then keeps its other kernels.
	Fragments *FragmentDialect
}

// FragmentDialect spells the fragment statements of ir.go in one
// language, for one product shape: a warp of Lanes threads adds an M×K
// A fragment times a K×N B fragment to an M×N float32 accumulator, the
// operands in Precision (a plan precision's name: "bf16"). Layout says,
// as data, which elements of each role's matrix a lane holds: the
// generators place their loads and read accumulators by it, and the CPU
// emulation of the shims holds the same elements in the same lanes.
type FragmentDialect struct {
	M, N, K, Lanes int
	Precision      string
	// Layout places element i of a lane's fragment of each role (FragA,
	// FragB, FragC); element i lies in register i/ElemsPerReg[role].
	Layout      [3][]FragPlace
	ElemsPerReg [3]int
	// Header is printed once, after the dialect's, in a source whose
	// kernels use fragments: the functions the statements call.
	Header string
	// SharedPairs declares a threadgroup array of packed pairs: %[1]s
	// name, %[2]d words.
	SharedPairs string
	// Decl declares a fragment of each role: %[1]s name.
	Decl [3]string
	// Reg spells register %[2]d of fragment %[1]s, to read or assign.
	Reg string
	// MMA adds %[2]s·%[3]s to accumulator %[1]s.
	MMA string
	// Pack packs floats %[1]s (low half) and %[2]s as bfloat16.
	Pack string
	// ShuffleXor is float %[1]s of lane (this lane xor %[2]d).
	ShuffleXor string
}

// FragPlace is where one element of a lane's fragment lies in its
// matrix: row RowG·g + RowT·t + Row, column ColG·g + ColT·t + Col, where
// g = lane/4 and t = lane%4 (the PTX ISA's groupID and
// threadID_in_group).
type FragPlace struct{ RowG, RowT, Row, ColG, ColT, Col int }

// Regs is the registers of a fragment of role r.
func (f *FragmentDialect) Regs(r FragRole) int { return len(f.Layout[r]) / f.ElemsPerReg[r] }

// At is the row and column of element i of lane's fragment of role r.
func (f *FragmentDialect) At(r FragRole, i, lane int) (row, col int) {
	p := f.Layout[r][i]
	g, t := lane/4, lane%4
	return p.RowG*g + p.RowT*t + p.Row, p.ColG*g + p.ColT*t + p.Col
}

// TileDialect spells the tile statements of ir.go in one language, for
// one tile shape: a warp of Lanes threads multiplies an M×K tile by a
// K×N one into an M×N float32 accumulator, rounding the operands to
// Precision (a plan precision's name: "tf32").
type TileDialect struct {
	M, N, K, Lanes int
	Precision      string
	// Header is printed once, after the dialect's, in a source whose
	// kernels use tiles: the types and functions the statements call.
	Header string
	// SharedArray declares a threadgroup float array, 32-byte aligned,
	// in a kernel that uses tiles: %[1]s name, %[2]d size.
	SharedArray string
	// Decl declares a tile of each role (TileA, TileB, TileAcc): %[1]s
	// name.
	Decl [3]string
	// Zero sets accumulator %[1]s to zero.
	Zero string
	// Load loads operand tile %[1]s from &%[2]s[%[3]s] with leading
	// dimension %[4]d, by role (A, B) and layout (row-, column-major).
	Load [2][2]string
	// MMA adds %[2]s·%[3]s to accumulator %[1]s, by the layouts of A and
	// of B (row-, column-major).
	MMA [2][2]string
	// Store writes accumulator %[1]s to &%[2]s[%[3]s] with leading
	// dimension %[4]d, by layout.
	Store [2]string
}

// Metal is the Metal Shading Language dialect (MSL 2.x). Kernels are
// dispatched with dispatchThreadgroups, so the grid is uniform.
var Metal = &Dialect{
	Name:          "metal",
	MaxBuffers:    31, // a compute function's buffer argument table
	Header:        "#include <metal_stdlib>\nusing namespace metal;\n",
	KernelDecl:    "kernel void %[1]s",
	ConstBuffer:   "device const %[1]s* %[2]s [[buffer(%[3]d)]]",
	MutableBuffer: "device %[1]s* %[2]s [[buffer(%[3]d)]]",
	BuiltinParams: []string{
		"uint mlb_gid [[thread_position_in_grid]]",
		"uint mlb_lid [[thread_position_in_threadgroup]]",
		"uint mlb_tgid [[threadgroup_position_in_grid]]",
		"uint mlb_tgsize [[threads_per_threadgroup]]",
	},
	Builtins: map[BuiltinKind]string{
		GlobalID:  "(int)mlb_gid",
		LocalID:   "(int)mlb_lid",
		GroupID:   "(int)mlb_tgid",
		GroupSize: "(int)mlb_tgsize",
	},
	Types:       map[Type]string{Float: "float", Int: "int", Uint: "uint", BF16: "ushort"},
	SharedArray: "threadgroup float %[1]s[%[2]d];",
	StoreBF16: "{ const uint mlb_u = as_type<uint>(%[3]s); " +
		"%[1]s[%[2]s] = (ushort)((mlb_u & 0x7fffffffu) > 0x7f800000u ? (mlb_u >> 16) | 0x40u : (mlb_u + 0x7fffu + ((mlb_u >> 16) & 1u)) >> 16); }",
	LoadBF16: "as_type<float>((uint)%[1]s[%[2]s] << 16)",
	Barrier:  "threadgroup_barrier(mem_flags::mem_threadgroup);",
	Funcs: map[Func]string{
		FnExp: "metal::exp", FnLog: "metal::log", FnTanh: "metal::tanh",
		FnSqrt: "metal::sqrt", FnRsqrt: "metal::rsqrt", FnMax: "metal::fmax",
		FnMin: "metal::fmin", FnAbs: "metal::fabs", FnAsFloat: "as_type<float>", FnExp2: "metal::exp2",
		// No erf in the Metal standard library: Rewrite expands it.
	},
	FloatSuffix:    "f",
	MaxSharedBytes: 30 << 10, // 32 KiB a kernel; 2 KiB stay free
	// Not measured on an Apple GPU: the blocks that fit 30 KB unshrunk.
	AttentionBlocks: "base",
}

// CUDA is the CUDA C++ dialect. Kernels are extern "C" so a driver can find
// them by name with cuModuleGetFunction; launches use Groups blocks of
// Threadgroup threads.
var CUDA = &Dialect{
	Name:          "cuda",
	Header:        "// CUDA C++; compile with nvcc or NVRTC.\n",
	KernelDecl:    "extern \"C\" __global__ void %[1]s",
	ConstBuffer:   "const %[1]s* __restrict__ %[2]s",
	MutableBuffer: "%[1]s* __restrict__ %[2]s",
	Builtins: map[BuiltinKind]string{
		GlobalID:  "(int)(blockIdx.x * blockDim.x + threadIdx.x)",
		LocalID:   "(int)threadIdx.x",
		GroupID:   "(int)blockIdx.x",
		GroupSize: "(int)blockDim.x",
	},
	Types:       map[Type]string{Float: "float", Int: "int", Uint: "unsigned int", BF16: "unsigned short"},
	SharedArray: "__shared__ __align__(16) float %[1]s[%[2]d];",
	StoreBF16: "{ const unsigned int mlb_u = __float_as_uint(%[3]s); " +
		"%[1]s[%[2]s] = (unsigned short)" + cudaRoundBF16("mlb_u") + "; }",
	LoadBF16: "__uint_as_float((unsigned int)%[1]s[%[2]s] << 16)",
	Load4:    "const float4 %[1]s = *reinterpret_cast<const float4*>(&%[2]s[%[3]s]);",
	Store4:   "*reinterpret_cast<float4*>(&%[1]s[%[2]s]) = make_float4(%[3]s, %[4]s, %[5]s, %[6]s);",
	// a bfloat16 is the top half of its float: lane 0 is the low half
	// of the first word (little-endian memory)
	Load4BF16: "const uint2 %[1]s = *reinterpret_cast<const uint2*>(&%[2]s[%[3]s]);",
	BF16Lanes: [4]string{"__uint_as_float(%[1]s.x << 16)", "__uint_as_float(%[1]s.x & 0xffff0000u)",
		"__uint_as_float(%[1]s.y << 16)", "__uint_as_float(%[1]s.y & 0xffff0000u)"},
	Store4BF16: "{ const unsigned int mlb_u0 = __float_as_uint(%[3]s), mlb_u1 = __float_as_uint(%[4]s), " +
		"mlb_u2 = __float_as_uint(%[5]s), mlb_u3 = __float_as_uint(%[6]s); " +
		"*reinterpret_cast<uint2*>(&%[1]s[%[2]s]) = make_uint2(" +
		cudaRoundBF16("mlb_u0") + " | " + cudaRoundBF16("mlb_u1") + " << 16, " +
		cudaRoundBF16("mlb_u2") + " | " + cudaRoundBF16("mlb_u3") + " << 16); }",
	Barrier: "__syncthreads();",
	Funcs: map[Func]string{
		FnExp: "expf", FnLog: "logf", FnTanh: "tanhf", FnErf: "erff",
		FnSqrt: "sqrtf", FnRsqrt: "rsqrtf", FnMax: "fmaxf", FnMin: "fminf",
		FnAbs: "fabsf", FnAsFloat: "__uint_as_float", FnExp2: "exp2f",
	},
	FloatSuffix:    "f",
	MaxSharedBytes: 46 << 10, // static __shared__: 48 KB a block; 2 KiB stay free
	// H200, models/gpt.cue in bf16: a 14.6 ms step against base's 16.3.
	AttentionBlocks: "ilp",
	Tiles:           cudaTiles,
	Fragments:       cudaFragments,
}

// Dialects lists the dialects by name, for command-line switches.
var Dialects = map[string]*Dialect{"metal": Metal, "cuda": CUDA}

// cudaRoundBF16 is the bfloat16 bits, in the low half of an unsigned
// int, of the float whose bits are the unsigned int u: StoreBF16's
// rounding (to nearest, ties to even; a NaN kept and quieted), as one
// parenthesised expression of at most 16 bits.
func cudaRoundBF16(u string) string {
	return fmt.Sprintf("((%[1]s & 0x7fffffffu) > 0x7f800000u ? (%[1]s >> 16) | 0x40u : (%[1]s + 0x7fffu + ((%[1]s >> 16) & 1u)) >> 16)", u)
}
