package gpu

import (
	"fmt"
	"strconv"
	"strings"
)

// Source prints kernels as one source file in dialect d: the dialect's
// header, then each kernel. Kernels must have been rewritten for d (Rewrite).
func Source(d *Dialect, kernels []*Kernel) (string, error) {
	var b strings.Builder
	b.WriteString(d.Header)
	for _, k := range kernels {
		if usesTiles(k.Body) && d.Tiles != nil {
			b.WriteString(d.Tiles.Header)
			break
		}
	}
	for _, k := range kernels {
		if usesFrags(k.Body) && d.Fragments != nil {
			b.WriteString(d.Fragments.Header)
			break
		}
	}
	for _, k := range kernels {
		b.WriteString("\n")
		if err := PrintKernel(&b, d, k); err != nil {
			return "", err
		}
	}
	return b.String(), nil
}

// PrintKernel writes one kernel in dialect d. It fails on a construct the
// dialect cannot spell (a math function Rewrite did not expand).
func PrintKernel(b *strings.Builder, d *Dialect, k *Kernel) error {
	p := printer{d: d, b: b}
	if usesTiles(k.Body) {
		if d.Tiles == nil {
			return fmt.Errorf("gpu: printing kernel %s for %s: the dialect has no matrix tiles", k.Name, d.Name)
		}
		p.tiles = map[string]TileDecl{}
	}
	if usesFrags(k.Body) {
		if d.Fragments == nil {
			return fmt.Errorf("gpu: printing kernel %s for %s: the dialect has no register fragments", k.Name, d.Name)
		}
		p.frags = map[string]FragRole{}
	}
	if k.Doc != "" {
		fmt.Fprintf(b, "// %s\n", k.Doc)
	}
	fmt.Fprintf(b, "// threadgroups %d x %d threads\n", k.Groups, k.Threadgroup)
	fmt.Fprintf(b, d.KernelDecl, k.Name)
	b.WriteString("(")
	var params []string
	for i, prm := range k.Params {
		f := d.ConstBuffer
		if prm.Mutable {
			f = d.MutableBuffer
		}
		params = append(params, fmt.Sprintf(f, d.Types[prm.Elem], prm.Name, i))
	}
	params = append(params, d.BuiltinParams...)
	b.WriteString(strings.Join(params, ",\n    "))
	b.WriteString(") {\n")
	p.stmts(k.Body, 1)
	b.WriteString("}\n")
	if p.err != nil {
		return fmt.Errorf("gpu: printing kernel %s for %s: %w", k.Name, d.Name, p.err)
	}
	return nil
}

type printer struct {
	d   *Dialect
	b   *strings.Builder
	err error
	// tiles are the kernel's tile variables by name, nil in a kernel
	// without tiles.
	tiles map[string]TileDecl
	// frags are the kernel's fragments' roles by name, nil in a kernel
	// without fragments.
	frags map[string]FragRole
}

func (p *printer) line(depth int, format string, args ...any) {
	p.b.WriteString(strings.Repeat("    ", depth))
	fmt.Fprintf(p.b, format, args...)
	p.b.WriteString("\n")
}

func (p *printer) stmts(ss []Stmt, depth int) {
	for _, s := range ss {
		p.stmt(s, depth)
	}
}

func (p *printer) stmt(s Stmt, depth int) {
	switch s := s.(type) {
	case Let:
		p.line(depth, "%s %s = %s;", p.d.Types[s.Type], s.Name, p.expr(s.Init, 0))
	case Assign:
		p.line(depth, "%s = %s;", s.Name, p.expr(s.Value, 0))
	case Store:
		p.line(depth, "%s[%s] = %s;", s.Buf, p.expr(s.Index, 0), p.expr(s.Value, 0))
	case StoreBF16:
		if p.d.StoreBF16 == "" {
			p.fail("dialect has no bfloat16 stores")
			return
		}
		p.line(depth, p.d.StoreBF16, s.Buf, p.expr(s.Index, 0), p.expr(s.Value, 0))
	case If:
		p.line(depth, "if (%s) {", p.expr(s.Cond, 0))
		p.stmts(s.Then, depth+1)
		if len(s.Else) > 0 {
			p.line(depth, "} else {")
			p.stmts(s.Else, depth+1)
		}
		p.line(depth, "}")
	case For:
		p.line(depth, "for (%s %s = %s; %s < %s; %s += %s) {", p.d.Types[Int], s.Var, p.expr(s.From, 0),
			s.Var, p.expr(s.To, precRel+1), s.Var, p.expr(s.Step, 0))
		p.stmts(s.Body, depth+1)
		p.line(depth, "}")
	case Shared:
		if p.tiles != nil {
			p.line(depth, p.d.Tiles.SharedArray, s.Name, s.Size)
			return
		}
		p.line(depth, p.d.SharedArray, s.Name, s.Size)
	case TileDecl, TileZero, TileLoad, TileMMA, TileStore:
		p.tile(s, depth)
	case FragDecl, FragSet, FragMMA, SharedPairs:
		p.frag(s, depth)
	case Barrier:
		p.line(depth, "%s", p.d.Barrier)
	case Return:
		p.line(depth, "return;")
	case Load4:
		if p.d.Load4 == "" {
			p.fail("dialect has no 16-byte loads (run Rewrite first)")
			return
		}
		v := "mlb4_" + s.Names[0]
		p.line(depth, p.d.Load4, v, s.Buf, p.expr(s.Index, 0))
		for i, lane := range []string{"x", "y", "z", "w"} {
			p.line(depth, "%s %s = %s.%s;", p.d.Types[Float], s.Names[i], v, lane)
		}
	case Load4BF16:
		if p.d.Load4BF16 == "" {
			p.fail("dialect has no 8-byte bfloat16 loads (run Rewrite first)")
			return
		}
		v := "mlb4_" + s.Names[0]
		p.line(depth, p.d.Load4BF16, v, s.Buf, p.expr(s.Index, 0))
		for i, lane := range p.d.BF16Lanes {
			p.line(depth, "%s %s = %s;", p.d.Types[Float], s.Names[i], fmt.Sprintf(lane, v))
		}
	case Store4BF16:
		if p.d.Store4BF16 == "" {
			p.fail("dialect has no 8-byte bfloat16 stores (run Rewrite first)")
			return
		}
		p.line(depth, p.d.Store4BF16, s.Buf, p.expr(s.Index, 0),
			p.expr(s.Values[0], 0), p.expr(s.Values[1], 0), p.expr(s.Values[2], 0), p.expr(s.Values[3], 0))
	case Store4:
		if p.d.Store4 == "" {
			p.fail("dialect has no 16-byte stores (run Rewrite first)")
			return
		}
		p.line(depth, p.d.Store4, s.Buf, p.expr(s.Index, 0),
			p.expr(s.Values[0], 0), p.expr(s.Values[1], 0), p.expr(s.Values[2], 0), p.expr(s.Values[3], 0))
	default:
		p.fail("unknown statement %T", s)
	}
}

// tile prints a tile statement in the dialect's Tiles, checking each
// tile's role against its declaration.
func (p *printer) tile(s Stmt, depth int) {
	t := p.d.Tiles
	decl := func(name string, roles ...TileRole) (TileDecl, bool) {
		d, ok := p.tiles[name]
		if !ok {
			p.fail("tile %s used before its declaration", name)
			return d, false
		}
		for _, r := range roles {
			if d.Role == r {
				return d, true
			}
		}
		p.fail("tile %s of role %d where roles %v are wanted", name, d.Role, roles)
		return d, false
	}
	layout := func(d TileDecl) int {
		if d.ColMajor {
			return 1
		}
		return 0
	}
	switch s := s.(type) {
	case TileDecl:
		if s.Role > TileAcc {
			p.fail("tile %s of unknown role %d", s.Name, s.Role)
			return
		}
		if old, ok := p.tiles[s.Name]; ok && old != s {
			p.fail("tile %s declared twice, as %+v and %+v", s.Name, old, s)
			return
		}
		p.tiles[s.Name] = s
		p.line(depth, t.Decl[s.Role], s.Name)
	case TileZero:
		if _, ok := decl(s.Name, TileAcc); ok {
			p.line(depth, t.Zero, s.Name)
		}
	case TileLoad:
		if d, ok := decl(s.Name, TileA, TileB); ok {
			p.line(depth, t.Load[d.Role][layout(d)], s.Name, s.Buf, p.expr(s.Offset, 0), s.Ld)
		}
	case TileMMA:
		_, ok1 := decl(s.Acc, TileAcc)
		a, ok2 := decl(s.A, TileA)
		b, ok3 := decl(s.B, TileB)
		if ok1 && ok2 && ok3 {
			p.line(depth, t.MMA[layout(a)][layout(b)], s.Acc, s.A, s.B)
		}
	case TileStore:
		if d, ok := decl(s.Acc, TileAcc); ok {
			p.line(depth, t.Store[layout(d)], s.Acc, s.Buf, p.expr(s.Offset, 0), s.Ld)
		}
	}
}

// frag prints a fragment statement in the dialect's Fragments, checking
// each fragment's role and register against its declaration.
func (p *printer) frag(s Stmt, depth int) {
	f := p.d.Fragments
	if p.frags == nil {
		p.fail("a fragment statement in a kernel the printer did not prepare for fragments")
		return
	}
	switch s := s.(type) {
	case FragDecl:
		if s.Role > FragC {
			p.fail("fragment %s of unknown role %d", s.Name, s.Role)
			return
		}
		if old, ok := p.frags[s.Name]; ok && old != s.Role {
			p.fail("fragment %s declared twice, as roles %d and %d", s.Name, old, s.Role)
			return
		}
		p.frags[s.Name] = s.Role
		p.line(depth, f.Decl[s.Role], s.Name)
	case FragSet:
		if p.fragReg(s.Name, s.Reg) {
			p.line(depth, f.Reg+" = %[3]s;", s.Name, s.Reg, p.expr(s.Value, 0))
		}
	case FragMMA:
		for _, x := range []struct {
			name string
			role FragRole
		}{{s.Acc, FragC}, {s.A, FragA}, {s.B, FragB}} {
			if r, ok := p.frags[x.name]; !ok || r != x.role {
				p.fail("fragment %s (declared %v, role %d) where role %d is wanted", x.name, ok, r, x.role)
				return
			}
		}
		p.line(depth, f.MMA, s.Acc, s.A, s.B)
	case SharedPairs:
		p.line(depth, f.SharedPairs, s.Name, s.Size)
	}
}

// fragReg checks that fragment name is declared and has register reg.
func (p *printer) fragReg(name string, reg int) bool {
	r, ok := p.frags[name]
	if !ok {
		p.fail("fragment %s used before its declaration", name)
		return false
	}
	if reg < 0 || reg >= p.d.Fragments.Regs(r) {
		p.fail("register %d of fragment %s, which has %d", reg, name, p.d.Fragments.Regs(r))
		return false
	}
	return true
}

func (p *printer) fail(format string, args ...any) {
	if p.err == nil {
		p.err = fmt.Errorf(format, args...)
	}
}

// C operator precedences, higher binds tighter.
const (
	precTernary = 3
	precOr      = 4
	precAnd     = 5
	precBitOr   = 6
	precBitXor  = 7
	precBitAnd  = 8
	precEq      = 9
	precRel     = 10
	precShift   = 11
	precAdd     = 12
	precMul     = 13
	precUnary   = 15
	precPrimary = 16
)

var binOps = map[BinOp]struct {
	tok  string
	prec int
}{
	OpAdd: {"+", precAdd}, OpSub: {"-", precAdd}, OpMul: {"*", precMul}, OpDiv: {"/", precMul},
	OpRem: {"%", precMul}, OpLt: {"<", precRel}, OpLe: {"<=", precRel}, OpGt: {">", precRel},
	OpGe: {">=", precRel}, OpEq: {"==", precEq}, OpNe: {"!=", precEq}, OpAnd: {"&&", precAnd},
	OpOr: {"||", precOr}, OpBitAnd: {"&", precBitAnd}, OpBitOr: {"|", precBitOr},
	OpBitXor: {"^", precBitXor}, OpShl: {"<<", precShift}, OpShr: {">>", precShift},
}

// expr prints e, parenthesised when its precedence is below min.
func (p *printer) expr(e Expr, min int) string {
	s, prec := p.exprPrec(e)
	if prec < min {
		return "(" + s + ")"
	}
	return s
}

func (p *printer) exprPrec(e Expr) (string, int) {
	switch e := e.(type) {
	case IntLit:
		if e.V < 0 {
			return strconv.FormatInt(e.V, 10), precUnary
		}
		return strconv.FormatInt(e.V, 10), precPrimary
	case UintLit:
		return strconv.FormatUint(uint64(e.V), 10) + "u", precPrimary
	case FloatLit:
		s := strconv.FormatFloat(float64(e.V), 'g', -1, 32)
		if !strings.ContainsAny(s, ".en") {
			s += ".0"
		}
		if e.V < 0 {
			return s + p.d.FloatSuffix, precUnary
		}
		return s + p.d.FloatSuffix, precPrimary
	case Var:
		return e.Name, precPrimary
	case Binary:
		op, ok := binOps[e.Op]
		if !ok {
			p.fail("unknown binary operator %d", e.Op)
			return "?", precPrimary
		}
		return p.expr(e.L, op.prec) + " " + op.tok + " " + p.expr(e.R, op.prec+1), op.prec
	case Unary:
		tok := "-"
		if e.Op == OpNot {
			tok = "!"
		}
		return tok + p.expr(e.X, precUnary), precUnary
	case Select:
		return p.expr(e.Cond, precTernary+1) + " ? " + p.expr(e.Then, precTernary+1) + " : " +
			p.expr(e.Else, precTernary), precTernary
	case Call:
		name, ok := p.d.Funcs[e.Fn]
		if !ok {
			p.fail("dialect has no math function %d (run Rewrite first)", e.Fn)
		}
		args := make([]string, len(e.Args))
		for i, a := range e.Args {
			args[i] = p.expr(a, 0)
		}
		return name + "(" + strings.Join(args, ", ") + ")", precPrimary
	case Load:
		return e.Buf + "[" + p.expr(e.Index, 0) + "]", precPrimary
	case LoadBF16:
		if p.d.LoadBF16 == "" {
			p.fail("dialect has no bfloat16 loads")
			return "?", precPrimary
		}
		return fmt.Sprintf(p.d.LoadBF16, e.Buf, p.expr(e.Index, 0)), precPrimary
	case Builtin:
		s, ok := p.d.Builtins[e.Kind]
		if !ok {
			p.fail("dialect has no thread coordinate %d", e.Kind)
		}
		return s, precUnary
	case Cast:
		return "(" + p.d.Types[e.To] + ")" + p.expr(e.X, precUnary), precUnary
	case FragGet:
		if p.frags == nil {
			p.fail("a fragment register in a kernel the printer did not prepare for fragments")
			return "?", precPrimary
		}
		if p.fragReg(e.Name, e.Reg) {
			return fmt.Sprintf(p.d.Fragments.Reg, e.Name, e.Reg), precPrimary
		}
		return "?", precPrimary
	case PackBF16:
		if p.frags == nil {
			p.fail("a bfloat16 pair in a kernel the printer did not prepare for fragments")
			return "?", precPrimary
		}
		return fmt.Sprintf(p.d.Fragments.Pack, p.expr(e.Lo, 0), p.expr(e.Hi, 0)), precPrimary
	case ShuffleXor:
		if p.frags == nil {
			p.fail("a shuffle in a kernel the printer did not prepare for fragments")
			return "?", precPrimary
		}
		return fmt.Sprintf(p.d.Fragments.ShuffleXor, p.expr(e.X, 0), e.Mask), precPrimary
	}
	p.fail("unknown expression %T", e)
	return "?", precPrimary
}
