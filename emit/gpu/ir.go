package gpu

// Type is the scalar type of a kernel value. Buffers hold float32 (Float),
// uint32 (Uint, the per-step argument buffer) or bfloat16 (BF16, a GEMM
// operand's twin); loop counters and indices are 32-bit signed (Int),
// which every GPU language has.
type Type uint8

// The scalar types of the IR.
const (
	Float Type = iota
	Int
	Uint
	// BF16 is the element of a buffer of bfloat16 values, 16 bits each
	// (the top half of a float32), that only StoreBF16 writes and LoadBF16
	// reads: no expression has this type.
	BF16
)

// Expr is an expression of the kernel IR. The set of expression kinds is
// closed: the printer handles each one.
type Expr interface{ isExpr() }

// IntLit is a 32-bit signed integer literal.
type IntLit struct{ V int64 }

// UintLit is a 32-bit unsigned integer literal (hash constants).
type UintLit struct{ V uint32 }

// FloatLit is a float32 literal; the printer writes the shortest decimal
// that reads back as the same float32.
type FloatLit struct{ V float32 }

// Var reads a variable declared by Let or For.
type Var struct{ Name string }

// BinOp is a binary operator with C semantics.
type BinOp uint8

// Binary operators. Comparisons and logical operators yield a C boolean.
const (
	OpAdd BinOp = iota
	OpSub
	OpMul
	OpDiv
	OpRem
	OpLt
	OpLe
	OpGt
	OpGe
	OpEq
	OpNe
	OpAnd
	OpOr
	OpBitAnd
	OpBitOr
	OpBitXor
	OpShl
	OpShr
)

// Binary applies Op to L and R.
type Binary struct {
	Op   BinOp
	L, R Expr
}

// UnOp is a prefix operator.
type UnOp uint8

// Unary operators.
const (
	OpNeg UnOp = iota
	OpNot
)

// Unary applies Op to X.
type Unary struct {
	Op UnOp
	X  Expr
}

// Select is Cond ? Then : Else.
type Select struct{ Cond, Then, Else Expr }

// Func is a math function a dialect may provide.
type Func uint8

// The math functions of the IR, on float arguments, plus AsFloat, which
// reinterprets the bits of a uint as a float (the learning rate travels in
// the uint argument buffer).
const (
	FnExp Func = iota
	FnLog
	FnTanh
	FnErf
	FnSqrt
	FnRsqrt
	FnMax
	FnMin
	FnAbs
	FnAsFloat
	// FnExp2 is 2^x: the fragment kernels' softmax keeps its scores in
	// units of log2(e), so that one multiply-add and the hardware's
	// exp2 make each probability.
	FnExp2
)

// Call calls a math function.
type Call struct {
	Fn   Func
	Args []Expr
}

// Load reads Buf[Index], where Buf is a kernel parameter or a threadgroup
// array.
type Load struct {
	Buf   string
	Index Expr
}

// BuiltinKind is a thread coordinate. Grids are one-dimensional.
type BuiltinKind uint8

// Thread coordinates, all Int in expressions.
const (
	GlobalID  BuiltinKind = iota // thread position in the grid
	LocalID                      // position in the threadgroup
	GroupID                      // threadgroup index in the grid
	GroupSize                    // threads per threadgroup
)

// Builtin reads a thread coordinate.
type Builtin struct{ Kind BuiltinKind }

// Cast converts X to type To (C conversion rules).
type Cast struct {
	To Type
	X  Expr
}

// LoadBF16 reads Buf[Index] of a BF16 buffer as the float32 it stands for
// (exactly: its 16 bits are the float's top half).
type LoadBF16 struct {
	Buf   string
	Index Expr
}

func (LoadBF16) isExpr() {}

func (IntLit) isExpr()   {}
func (UintLit) isExpr()  {}
func (FloatLit) isExpr() {}
func (Var) isExpr()      {}
func (Binary) isExpr()   {}
func (Unary) isExpr()    {}
func (Select) isExpr()   {}
func (Call) isExpr()     {}
func (Load) isExpr()     {}
func (Builtin) isExpr()  {}
func (Cast) isExpr()     {}

// Stmt is a statement of the kernel IR.
type Stmt interface{ isStmt() }

// Let declares a mutable local variable.
type Let struct {
	Name string
	Type Type
	Init Expr
}

// Assign sets a variable declared by Let.
type Assign struct {
	Name  string
	Value Expr
}

// Store writes Buf[Index] = Value; Buf is a mutable parameter or a
// threadgroup array.
type Store struct {
	Buf          string
	Index, Value Expr
}

// If runs Then when Cond holds, else Else (which may be empty).
type If struct {
	Cond       Expr
	Then, Else []Stmt
}

// For runs Body for Var = From; Var < To; Var += Step. To and Step are
// constants in every generator; From may be a thread coordinate (strided
// loops over a threadgroup).
type For struct {
	Var      string
	From, To Expr
	Step     Expr
	Body     []Stmt
}

// Shared declares a threadgroup (shared) float array of Size elements. It
// must appear at the top level of a kernel body.
type Shared struct {
	Name string
	Size int
}

// Barrier waits for every thread of the threadgroup and makes its threadgroup
// memory writes visible. Every thread of a threadgroup must reach it.
type Barrier struct{}

// Return ends the thread.
type Return struct{}

// Load4 declares the four float locals Names[0..3] = Buf[Index] …
// Buf[Index+3], read as one 16-byte access where the dialect has one
// (Dialect.Load4; otherwise Rewrite splits it into four loads). Index is a
// multiple of 4, and a parameter is bound at a 16-byte-aligned address (a
// planner buffer's offset is a multiple of planner.Align, and an operand's
// offset within it must be a multiple of 4: the generator's duty).
type Load4 struct {
	Buf   string
	Index Expr
	Names [4]string
}

// Store4 writes Values[0..3] to Buf[Index] … Buf[Index+3] as one 16-byte
// access where the dialect has one (Dialect.Store4); Index as Load4's.
type Store4 struct {
	Buf    string
	Index  Expr
	Values [4]Expr
}

// StoreBF16 writes the float Value to Buf[Index] of a BF16 buffer,
// rounded to bfloat16 to nearest, ties to even (NaN stays NaN, quiet;
// infinities and values that round past the largest bfloat16 become
// infinite), as rt/cpu's RoundBF16 rounds.
type StoreBF16 struct {
	Buf          string
	Index, Value Expr
}

func (StoreBF16) isStmt() {}

// Load4BF16 declares the four float locals Names[0..3] = Buf[Index] …
// Buf[Index+3] of a BF16 buffer, read as one 8-byte access where the
// dialect has one (Dialect.Load4BF16; otherwise Rewrite splits it into
// four LoadBF16s). Index is a multiple of 4 and the buffer is bound at
// an 8-byte-aligned address, as Load4's. storedBF16 makes it of a Load4.
type Load4BF16 struct {
	Buf   string
	Index Expr
	Names [4]string
}

// Store4BF16 writes Values[0..3], each rounded as StoreBF16 rounds, to
// Buf[Index] … Buf[Index+3] of a BF16 buffer as one 8-byte access where
// the dialect has one (Dialect.Store4BF16); Index as Load4BF16's.
type Store4BF16 struct {
	Buf    string
	Index  Expr
	Values [4]Expr
}

func (Load4BF16) isStmt()  {}
func (Store4BF16) isStmt() {}

func (Let) isStmt()     {}
func (Assign) isStmt()  {}
func (Store) isStmt()   {}
func (If) isStmt()      {}
func (For) isStmt()     {}
func (Shared) isStmt()  {}
func (Barrier) isStmt() {}
func (Return) isStmt()  {}
func (Load4) isStmt()   {}
func (Store4) isStmt()  {}

// Param is a buffer parameter of a kernel. Its position in Kernel.Params is
// its binding index ([[buffer(i)]] in Metal, the i-th argument in CUDA).
type Param struct {
	Name    string
	Elem    Type // Float, Uint for the per-step argument buffer, or BF16
	Mutable bool
	// Size is the number of elements the kernel may touch, so a runtime can
	// check that the buffer bound there is large enough.
	Size int
}

// Bytes is the bytes of the Size elements p may touch: 2 an element of a
// BF16 buffer, 4 of the others.
func (p Param) Bytes() int {
	if p.Elem == BF16 {
		return 2 * p.Size
	}
	return 4 * p.Size
}

// Kernel is one GPU function. It is launched as Groups threadgroups of
// Threadgroup threads (a uniform grid: kernels guard their own bounds).
type Kernel struct {
	Name        string
	Doc         string // one line printed above the kernel
	Params      []Param
	Threadgroup int
	Groups      int
	Body        []Stmt
}

// Cooperative matrix tiles: the products of a dialect's matrix units
// (tensor cores), where Dialect.Tiles names them. A tile variable is a
// matrix spread over the Tiles.Lanes threads of a warp (simdgroup) in a
// layout that only the dialect knows: the kernel fills, loads, multiplies
// and stores it whole, never reading an element of it. Every thread of
// the warp runs each tile statement, with the same operands (the
// statements sit in warp-uniform control flow); a tile store's elements
// are visible to other threads after a Barrier, and a tile load reads
// what a Barrier made visible.

// TileRole is the part a tile plays in a product Acc += A·B: A is M×K, B
// K×N and the accumulator M×N (Dialect.Tiles' shape), all float32 in
// memory; A and B are rounded to the dialect's tile precision as they are
// loaded, and the accumulator sums in float32.
type TileRole uint8

// The tile roles.
const (
	TileA TileRole = iota
	TileB
	TileAcc
)

// TileDecl declares tile variable Name of role Role. Its loads and stores
// read and write memory row-major (element (r, c) at Offset + r·Ld + c)
// or, with ColMajor, column-major (at Offset + c·Ld + r); a product's
// operands keep the layout they were declared with.
type TileDecl struct {
	Name     string
	Role     TileRole
	ColMajor bool
}

// TileZero sets every element of accumulator tile Name to 0.
type TileZero struct{ Name string }

// TileLoad loads operand tile Name (role A or B) from threadgroup array
// Buf at element Offset with leading dimension Ld, in its declared
// layout. Offset is a multiple of 8 and Ld of 4 (32-byte aligned tile
// starts, 16-byte aligned rows: the generator's duty), and the kernel's
// threadgroup arrays are 32-byte aligned (Tiles.SharedArray).
type TileLoad struct {
	Name   string
	Buf    string
	Offset Expr
	Ld     int
}

// TileMMA adds the product of tiles A and B to accumulator tile Acc.
type TileMMA struct{ Acc, A, B string }

// TileStore writes accumulator tile Acc to threadgroup array Buf at
// element Offset with leading dimension Ld, in its declared layout
// (alignment as TileLoad's).
type TileStore struct {
	Acc    string
	Buf    string
	Offset Expr
	Ld     int
}

func (TileDecl) isStmt()  {}
func (TileZero) isStmt()  {}
func (TileLoad) isStmt()  {}
func (TileMMA) isStmt()   {}
func (TileStore) isStmt() {}

// usesTiles reports whether ss holds a tile statement.
func usesTiles(ss []Stmt) bool {
	for _, s := range ss {
		switch s := s.(type) {
		case TileDecl, TileZero, TileLoad, TileMMA, TileStore:
			return true
		case If:
			if usesTiles(s.Then) || usesTiles(s.Else) {
				return true
			}
		case For:
			if usesTiles(s.Body) {
				return true
			}
		}
	}
	return false
}

// Register fragments: the operands of a dialect's warp-wide matrix
// product (Dialect.Fragments) held in each lane's own registers, in the
// per-lane layout that FragmentDialect.Layout writes down as data. Unlike
// tiles, a kernel reads and writes a fragment's registers one by one, at
// places it computes from that layout and the lane (LocalID % Lanes), so
// that an accumulator's elements can be masked, scaled and turned into
// an operand without leaving the registers. A register of an A or B
// fragment holds two elements (FragmentDialect.ElemsPerReg: bfloat16
// pairs, the lower-numbered element in the low half); one of an
// accumulator holds one float32. FragMMA and ShuffleXor are collective:
// every lane of the warp runs them, in control flow that is uniform over
// the threadgroup (the CPU emulation exchanges the lanes' registers at
// them as it does at a barrier).

// FragRole is the part a fragment plays in a product C += A·B: A is M×K,
// B K×N and C M×N (FragmentDialect's shape).
type FragRole uint8

// The fragment roles.
const (
	FragA FragRole = iota
	FragB
	FragC
)

// FragDecl declares fragment Name of role Role: its registers, not
// initialised.
type FragDecl struct {
	Name string
	Role FragRole
}

// FragSet sets register Reg of fragment Name to Value: a Uint holding
// two packed bfloat16 elements (PackBF16, or a word of a SharedPairs
// array) for A and B, a Float for C.
type FragSet struct {
	Name  string
	Reg   int
	Value Expr
}

// FragMMA adds the product of fragments A and B to accumulator
// fragment Acc (collective over the warp).
type FragMMA struct{ Acc, A, B string }

// SharedPairs declares a threadgroup array of Size uint words, each two
// bfloat16 values packed as a fragment register holds them (the low
// half first): operands staged once, rounded, for fragments to read a
// register at a time. It must appear at the top level of a kernel body.
type SharedPairs struct {
	Name string
	Size int
}

func (FragDecl) isStmt()    {}
func (FragSet) isStmt()     {}
func (FragMMA) isStmt()     {}
func (SharedPairs) isStmt() {}

// FragGet reads register Reg of fragment Name: a Float of an
// accumulator (the only role the generators read).
type FragGet struct {
	Name string
	Reg  int
}

// PackBF16 is the Uint holding Lo and Hi, floats, rounded to bfloat16 to
// nearest, ties to even, Lo in the low half.
type PackBF16 struct{ Lo, Hi Expr }

// ShuffleXor is the float X of the lane whose index is this lane's xor
// Mask, within the warp (collective over the warp).
type ShuffleXor struct {
	X    Expr
	Mask int
}

func (FragGet) isExpr()    {}
func (PackBF16) isExpr()   {}
func (ShuffleXor) isExpr() {}

// usesFrags reports whether ss holds a fragment statement or
// expression.
func usesFrags(ss []Stmt) bool {
	found := false
	walkStmts(ss, func(s Stmt) {
		switch s.(type) {
		case FragDecl, FragSet, FragMMA, SharedPairs:
			found = true
		}
	}, func(e Expr) {
		switch e.(type) {
		case FragGet, PackBF16, ShuffleXor:
			found = true
		}
	})
	return found
}

// walkStmts calls fs on every statement of ss and fe on every
// expression, nested ones included.
func walkStmts(ss []Stmt, fs func(Stmt), fe func(Expr)) {
	rewriteStmts(ss, func(e Expr) Expr {
		fe(e)
		return e
	})
	var walk func(ss []Stmt)
	walk = func(ss []Stmt) {
		for _, s := range ss {
			fs(s)
			switch s := s.(type) {
			case If:
				walk(s.Then)
				walk(s.Else)
			case For:
				walk(s.Body)
			}
		}
	}
	walk(ss)
}
