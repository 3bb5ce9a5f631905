package gpu

import "fmt"

// The fused attention kernels (planner.KAttention, KAttentionBwd), after
// FlashAttention-2: no kernel holds the scores of a whole matrix
// [Tq, Tk], only a tile of them in threadgroup memory.
//
// Each kernel's threadgroup owns a block of rows (queries, or keys in the
// backward's key kernel) and streams the other side through threadgroup
// memory a tile of columns at a time. Its products (scores q·kᵀ, the
// backward's do·vᵀ, and the outputs p·v, ds·k, pᵀ·do, dsᵀ·q) are
// register-blocked: a thread owns a micro-tile of 4 rows (ty·4 … ty·4+3,
// read from threadgroup memory as one 16-byte access) by columns tx,
// tx+ct, … (ct = 16 or 32 threads read consecutive floats, one bank
// each), or, in the forward, whose arrays are all read along their rows,
// by runs of 4 columns 4tx … 4tx+3, 32+4tx, … (16-byte reads on both
// sides; the backward reads some arrays along both axes, at odd strides,
// by single columns); each value a thread loads feeds 4 to 16
// multiply-adds. How large the blocks are, and how many threads share
// one, is a policy of the target (attnPolicies, block()).
//
// The forward runs a threadgroup per (matrix, block of queries): it
// stages its queries once (transposed), then per tile of keys the tile's
// kᵀ and v; each thread computes its micro-tile of scores, and the
// block's rows fold them into a running maximum and sum (the online
// softmax) through per-thread partial maxima and sums in threadgroup
// memory. The probabilities replace kᵀ in threadgroup memory and each
// thread adds its micro-tile of p·v to the output in registers. A causal
// mask skips the tiles past the block's last query. It writes o and each
// query's log-sum-exp.
//
// The backward recomputes the probabilities from q, kᵀ and the
// log-sum-exp in three kernels: delta = rowsum(do∘o); dk and dv by a
// threadgroup per (matrix, block of keys) over tiles of queries; dq by a
// threadgroup per (matrix, block of queries) over tiles of keys. Each
// output element is summed by one thread in a fixed order: no atomics,
// and the same bits every run.
//
// Dropout of the probabilities draws the mask of the unfused dropout step
// (the element's index in [mats, Tq, Tk] hashed with the step's seed), so
// fused and unfused programs drop the same elements.
//
// A padding mask (planner.Attr.Padding) is one more condition of
// visible, the pairs a kernel keeps: the key's token id is not the pad
// id. Masked scores stand at negHuge, never −∞, so the online softmax's
// corrections stay finite; a query whose every key is masked ends with
// a sum of 0, and the forward writes o = 0 and lse = +Inf for it
// (rowEnd). The backward's masks alone give such a row p = 0, whatever
// its lse.

// attnGeom is one fused attention: mats matrices of tq queries and tk
// keys of dimension d. heads 0: q, v and o (and do, dq, dv) are [mats,
// T, d] and k comes as kᵀ [mats, d, tk] (and dkᵀ); heads H > 0: they are
// token-major, [B, T, H, d] with mat = b·H + h, k (and dk) too, as the
// projections of a transformer write them (planner.Attr.Perm). padded:
// the kernels read the token ids [batch, tk] as their last input ("ids",
// after the outputs) and mask key j of matrix mat where ids[b·tk + j] =
// padID, b = mat / (mats/batch) the matrix's sample (planner.Attr.Padding).
type attnGeom struct {
	mats, tq, tk, d int
	heads           int
	scale           float32
	causal          bool
	rate            float32 // dropout; 0 for none (and outside training)
	stream          uint32  // the dropout's stream (DropoutStream)
	padded          bool
	batch           int // the samples of ids, where padded
	padID           float32
	tiling          attnTiling
}

// rowAt is the index of row t's first element in matrix mat of an
// operand of rows rows a matrix: q, v, o and their gradients, and in
// token-major layout k and dk.
func (g attnGeom) rowAt(mat, t Expr, rows int) Expr {
	if g.heads == 0 {
		return mul(add(mul(mat, i32(rows)), t), i32(g.d))
	}
	h := g.heads
	return add(mul(add(mul(div(mat, i32(h)), i32(rows)), t), i32(h*g.d)), mul(rem(mat, i32(h)), i32(g.d)))
}

// keyAt is the index of dimension dd of key j of matrix mat in k (or
// kᵀ); kName names that parameter, dkName its gradient's.
func (g attnGeom) keyAt(mat, j, dd Expr) Expr {
	if g.heads == 0 {
		return add(mul(add(mul(mat, i32(g.d)), dd), i32(g.tk)), j)
	}
	return add(g.rowAt(mat, j, g.tk), dd)
}
func (g attnGeom) kName() string  { return map[bool]string{true: "kt", false: "k"}[g.heads == 0] }
func (g attnGeom) dkName() string { return "d" + g.kName() }

func (g attnGeom) String() string {
	s := fmt.Sprintf("%d matrices of %d queries and %d keys of %d, scale %g", g.mats, g.tq, g.tk, g.d, g.scale)
	if g.causal {
		s += ", causal"
	}
	if g.rate > 0 {
		s += fmt.Sprintf(", dropout %g", g.rate)
	}
	if g.heads > 0 {
		s += fmt.Sprintf(", token-major over %d heads", g.heads)
	}
	if g.padded {
		s += fmt.Sprintf(", padding id %g", g.padID)
	}
	return s
}

// attnRows is the rows of a thread's micro-tile (ty·4 … ty·4+3), read
// from a row-indexed threadgroup array as one 16-byte access.
const attnRows = 4

// attnCols is the threads across a block's columns where a thread's
// columns are single (cw 1), unless the tiling also allows 32: thread tx
// owns columns and output dimensions tx, tx+16, …, so that 16
// consecutive threads read 16 consecutive floats.
const attnCols = 16

// attnWideCols is the threads across a block's columns where a thread's
// columns come in fours (cw 4): thread tx owns columns and output
// dimensions 4tx … 4tx+3, 32+4tx … 32+4tx+3, …, read from a
// column-indexed threadgroup array as one 16-byte access (8 threads: 128
// consecutive bytes).
const attnWideCols = 8

// attnBlock is the shape of one kernel's work: rows owned by a
// threadgroup, columns streamed through threadgroup memory a tile at a
// time; ct threads across the columns, each owning runs of cw
// consecutive columns; a thread's micro-tile is attnRows rows by cn
// columns (cols/ct) of the tile and, of the outputs, attnRows rows by dn
// dimensions (d rounded up to ct·cw, over ct).
type attnBlock struct {
	rows, cols int
	ct, cw     int
	cn, dn     int
}

// newBlock is the block of rows × cols of d dimensions with ct threads
// across the columns, each owning runs of cw.
func newBlock(rows, cols, ct, cw, d int) attnBlock {
	return attnBlock{rows: rows, cols: cols, ct: ct, cw: cw, cn: cols / ct, dn: ceilDiv(d, ct*cw) * cw}
}

// threads is the threadgroup's size: ct threads per 4 rows.
func (b attnBlock) threads() int { return b.rows / attnRows * b.ct }

// dw is d rounded up to ct·cw: the output dimensions the threads own;
// the arrays they read by output dimension hold zeros past d.
func (b attnBlock) dw() int { return b.dn * b.ct }

// wide is whether the thread's columns come in fours (16-byte reads of a
// column-indexed array).
func (b attnBlock) wide() bool { return b.cw == 4 }

// rs is the stride of a row-indexed threadgroup array ([x][row]): a
// multiple of 4 for the 16-byte reads, not of 32 so that the transposed
// writes (consecutive x) spread over the banks.
func (b attnBlock) rs() int { return b.rows + attnRows }

// attnTiling is how block() picks a kernel's block: rows up to maxRows;
// where a thread's columns are single, ct threads across for ct in cts
// (where they come in fours, always attnWideCols); at most shared bytes
// of threadgroup memory (its dialect's MaxSharedBytes or less); and, where minThreads > 0, a block of at least
// minThreads threads before a larger one (more warps a streaming
// multiprocessor hide the latency of each one's threadgroup reads).
type attnTiling struct {
	name       string
	maxRows    int
	cts        []int
	minThreads int
	shared     int
}

// attnPolicy is one named way to pick blocks; budget bounds its
// threadgroup memory below the dialect's MaxSharedBytes (0: none).
type attnPolicy struct {
	name                string
	maxRows, minThreads int
	cts                 []int
	budget              int
}

// attnPolicies are the block policies; a dialect names its default
// (Dialect.AttentionBlocks). On an H200 at d 64 and T 256 (228 KB of
// shared memory an SM) they give:
//
//	base: 64-thread blocks of 27–30 KB (7 an SM: 14 warps);
//	ilp:  larger blocks, larger micro-tiles, at most 46 KB: forward
//	      64×32 of 128 threads (4×4 scores a thread, 38 KB), backward
//	      32×32 of 128 (4×2 scores, 40–43 KB): 5 an SM, 20 warps.
//
// Under Metal's 30 KiB ilp comes down to blocks that fit. Measured side
// by side on the H200 (bench/gpu/attn-variants.sh, models/gpt.cue in
// bf16; docs/runs/gpu-attn-variants-2026-11-29.txt), ilp's step was
// 14.6 ms against base's 16.3; two more policies measured then (128
// threads within 30 KB: 15.0; 256 threads: 15.1) were dropped.
var attnPolicies = []attnPolicy{
	{name: "base", maxRows: 32, cts: []int{attnCols}, budget: 30 << 10},
	{name: "ilp", maxRows: 64, cts: []int{attnCols}, minThreads: 128},
}

// attnVariant names the block policy of the fused attention kernels
// (attnPolicies); empty is the dialect's own. It is a benchmarking hook,
// set only by building mlbuild with
//
//	go build -ldflags "-X github.com/mlbuild/mlbuild/emit/gpu.attnVariant=NAME"
//
// (bench/gpu/attn-variants-bundle.sh), so that one GPU run can time the
// policies side by side.
var attnVariant string

// attnTilingFor is the tiling of policy name ("" the dialect's default)
// under dialect d.
func attnTilingFor(d *Dialect, name string) (attnTiling, error) {
	if name == "" {
		name = d.AttentionBlocks
	}
	for _, p := range attnPolicies {
		if p.name == name {
			shared := d.MaxSharedBytes
			if p.budget > 0 {
				shared = min(shared, p.budget)
			}
			return attnTiling{name: p.name, maxRows: p.maxRows, cts: p.cts, minThreads: p.minThreads, shared: shared}, nil
		}
	}
	var names []string
	for _, p := range attnPolicies {
		names = append(names, p.name)
	}
	return attnTiling{}, fmt.Errorf("attention block policy %q (attnVariant, set at build time, or the %s dialect's) is none of %v", name, d.Name, names)
}

// attnMaxThreads bounds a block's threads, well inside Metal's 1024.
const attnMaxThreads = 256

// block picks rows (4 … maxRows, at most the next power of two ≥ ownN,
// but 4 at least), cols (16 or 32) and the threads across them whose
// threadgroup arrays, floats(b), fit the tiling's shared bytes: first,
// where minThreads > 0, one of at least minThreads threads; then the
// largest tile, rows·cols, and of two as large the one of more columns (2
// columns a thread feed each row load twice); then, where wide (the
// kernel reads its column-indexed arrays along their rows), the one whose
// columns come in fours, 8 threads across; then the one of fewer threads
// (a larger micro-tile).
func (g attnGeom) block(ownN, streamN int, wide bool, floats func(b attnBlock) int) attnBlock {
	t := g.tiling
	var best, last attnBlock
	better := func(c, b attnBlock) bool {
		if b.rows == 0 {
			return true
		}
		if cm, bm := c.threads() >= t.minThreads, b.threads() >= t.minThreads; cm != bm {
			return cm
		}
		a, ba := c.rows*c.cols, b.rows*b.cols
		if a != ba {
			return a > ba
		}
		if c.cols != b.cols {
			return c.cols > b.cols
		}
		if c.cw != b.cw {
			return c.cw > b.cw
		}
		return c.threads() < b.threads()
	}
	for rows := min(t.maxRows, max(attnRows, pow2AtLeast(ownN))); rows >= attnRows; rows /= 2 {
		for cols := min(32, max(attnCols, pow2AtLeast(streamN))); cols >= attnCols; cols /= 2 {
			var cands []attnBlock
			for _, ct := range t.cts {
				if cols%ct == 0 {
					cands = append(cands, newBlock(rows, cols, ct, 1, g.d))
				}
			}
			if wide && cols == 32 {
				cands = append(cands, newBlock(rows, cols, attnWideCols, 4, g.d))
			}
			for _, c := range cands {
				if c.threads() > attnMaxThreads {
					continue
				}
				last = c
				if 4*floats(c) > t.shared {
					continue
				}
				if better(c, best) {
					best = c
				}
			}
		}
	}
	if best.rows == 0 {
		return last // TestAttentionTilingFits: every d ≤ MaxAttentionDim fits
	}
	return best
}

// pow2AtLeast is the smallest power of two ≥ n (1 for n ≤ 1).
func pow2AtLeast(n int) int {
	p := 1
	for p < n {
		p *= 2
	}
	return p
}

// nm is a register's name: base and its indices, o2_1.
func nm(base string, ix ...int) string {
	for i, x := range ix {
		if i > 0 {
			base += "_"
		}
		base += fmt.Sprint(x)
	}
	return base
}

// ids declares mat, the block's first row r0 (of rows a block, blocks a
// matrix), and the thread's ty (its rows' group) and tx (its columns').
func (b attnBlock) ids(r0 string, blocks int) []Stmt {
	return []Stmt{
		let("mat", Int, div(tgidE, i32(blocks))),
		let(r0, Int, mul(rem(tgidE, i32(blocks)), i32(b.rows))),
		let("ty", Int, div(lidE, i32(b.ct))),
		let("tx", Int, rem(lidE, i32(b.ct))),
	}
}

// row is the block's row a of this thread's micro-tile.
func row(a int) Expr { return add(mul(vr("ty"), i32(attnRows)), i32(a)) }

// col is the thread's column (or output dimension) c: run c/cw, place
// c%cw in it.
func (b attnBlock) col(c int) Expr {
	return add(mul(vr("tx"), i32(b.cw)), i32(c/b.cw*b.cw*b.ct+c%b.cw))
}

// rowsAt is the index of this thread's first row in a row-indexed
// threadgroup array of stride rs, at x.
func rowsAt(x Expr, rs int) Expr { return add(mul(x, i32(rs)), mul(vr("ty"), i32(attnRows))) }

// stage copies an n×m block into threadgroup array sh, every thread of
// tg taking elements (y, x) with x fastest: sh[dst(y, x)] = src(y, x)
// where ok(y, x) holds (nil: always), else 0.
func stage(sh string, n, m, tg int, dst func(y, x Expr) Expr, ok func(y, x Expr) Expr, src func(y, x Expr) Expr) Stmt {
	e := vr("e_" + sh)
	y, x := div(e, i32(m)), rem(e, i32(m))
	v := src(y, x)
	if c := ok(y, x); c != nil {
		v = sel(c, v, flt(0))
	}
	return For{"e_" + sh, lidE, i32(n * m), i32(tg), []Stmt{store(sh, dst(y, x), v)}}
}

// below is the condition e < n, or nil where e < limit ≤ n always holds
// (e is below limit by construction).
func below(e Expr, n, limit int) Expr {
	if limit <= n {
		return nil
	}
	return lt(e, i32(n))
}

// all joins conditions with &&, nil where there are none.
func all(cs ...Expr) Expr {
	for _, c := range cs {
		if c != nil {
			return and(cs...)
		}
	}
	return nil
}

// microProduct adds to the thread's micro-tile over x < n:
// acc{a}_{c} += A[aAt(x) + a] · B[bAt(x, c)] for a < 4, c < cols, the four
// A values read as one 16-byte access (aAt(x) a multiple of 4), and the
// B values too, four at a time, where bVec (bAt(x, c+i) = bAt(x, c)+i for
// i < 4, c a multiple of 4, and bAt(x, c) a multiple of 4).
func microProduct(x string, n int, aBuf string, aAt func(x Expr) Expr, bBuf string, bAt func(x Expr, c int) Expr, bVec bool, cols int, acc string) Stmt {
	an := [4]string{nm(aBuf+"_", 0), nm(aBuf+"_", 1), nm(aBuf+"_", 2), nm(aBuf+"_", 3)}
	body := []Stmt{Load4{aBuf, aAt(vr(x)), an}}
	for c := 0; c < cols; c++ {
		if bVec && c%4 == 0 {
			body = append(body, Load4{bBuf, bAt(vr(x), c), [4]string{nm(bBuf+"_", c), nm(bBuf+"_", c+1), nm(bBuf+"_", c+2), nm(bBuf+"_", c+3)}})
		} else if !bVec {
			body = append(body, let(nm(bBuf+"_", c), Float, load(bBuf, bAt(vr(x), c))))
		}
	}
	for a := 0; a < attnRows; a++ {
		for c := 0; c < cols; c++ {
			body = append(body, set(nm(acc, a, c), add(vr(nm(acc, a, c)), mul(vr(an[a]), vr(nm(bBuf+"_", c))))))
		}
	}
	return For{x, i32(0), i32(n), i32(1), body}
}

// zeros declares the micro-tile acc{a}_{c} = 0, a < 4, c < cols.
func zeros4(acc string, cols int) []Stmt {
	var s []Stmt
	for a := 0; a < attnRows; a++ {
		for c := 0; c < cols; c++ {
			s = append(s, let(nm(acc, a, c), Float, flt(0)))
		}
	}
	return s
}

// visible is whether query qi sees key kj: both in range and, causal,
// kj ≤ qi; qTo and kTo bound qi and kj by construction (the blocks and
// tiles a kernel walks), so that a range check they imply is left out;
// nil where every pair is visible.
func (g attnGeom) visible(qi, kj Expr, qTo, kTo int) Expr {
	c := all(below(qi, g.tq, qTo), below(kj, g.tk, kTo))
	if g.causal {
		c = all(c, le(kj, qi))
	}
	return all(c, g.notPad(kj))
}

// unpadded is whether key kj of matrix mat is no padding, where kj < kTo
// by construction (its range check, where kTo > tk, comes first: the ids
// are read only in range); nil without a padding mask. It is the mask of
// the pairs that need no other (in range and, causal, seen).
func (g attnGeom) unpadded(kj Expr, kTo int) Expr {
	if !g.padded {
		return nil
	}
	return all(below(kj, g.tk, kTo), g.notPad(kj))
}

// notPad is ids[b·tk + kj] ≠ padID for matrix mat's sample b (kj in
// range), nil without a padding mask.
func (g attnGeom) notPad(kj Expr) Expr {
	if !g.padded {
		return nil
	}
	b := div(vr("mat"), i32(g.mats/g.batch))
	return ne(load("ids", add(mul(b, i32(g.tk)), kj)), flt(g.padID))
}

// rowEnd is a forward's statements that write the normaliser inv = 1/l
// of a query row whose probabilities sum to l, and its log-sum-exp,
// lse(m, l) (an expression); padded, a row that sees no key (l = 0: every
// key masked) gets inv = 0, so o = 0, and lse = +Inf (the backward's
// masks give it no gradient either).
func (g attnGeom) rowEnd(inv string, l Expr, lse func() Expr) (Stmt, Expr) {
	if !g.padded {
		return let(inv, Float, div(flt(1), l)), lse()
	}
	seen := gt(l, flt(0))
	return let(inv, Float, sel(seen, div(flt(1), l), flt(0))), sel(seen, lse(), call(FnAsFloat, u32(0x7f800000)))
}

// masked is v where c holds (nil: always), else the value of a masked
// pair.
func masked(c, v, m Expr) Expr {
	if c == nil {
		return v
	}
	return sel(c, v, m)
}

// keep declares float name = the dropout's multiplier (0 or 1/(1−rate))
// of probability (mat, qi, kj), or 1 without dropout.
func (g attnGeom) keep(name string, qi, kj Expr) []Stmt {
	if g.rate <= 0 {
		return []Stmt{let(name, Float, flt(1))}
	}
	idx := add(mul(add(mul(vr("mat"), i32(g.tq)), qi), i32(g.tk)), kj)
	s := hashUniformStmts("u_"+name, idx, g.stream)
	return append(s, let(name, Float, sel(ge(vr("u_"+name), flt(g.rate)), flt(1/(1-g.rate)), flt(0))))
}

// params are the kernel's parameters with the step arguments first when
// it draws dropout, and the token ids last where padded.
func (g attnGeom) params(ps ...Param) []Param {
	if g.padded {
		ps = append(ps, in("ids", g.batch*g.tk))
	}
	if g.rate > 0 {
		return append([]Param{argsParam()}, ps...)
	}
	return ps
}

// kvBwdParams are the parameters of a backward kernel that writes dk
// (wantDK) and dv (wantDV): q, kᵀ (or k), v, the output's gradient, the
// log-sum-exp and delta, then the gradients it writes.
func (g attnGeom) kvBwdParams(wantDK, wantDV bool) []Param {
	D := g.d
	nq := g.mats * g.tq * D
	params := []Param{in("q", nq), in(g.kName(), g.mats*D*g.tk), in("v", g.mats*g.tk*D), in("dout", nq), in("lse", g.mats*g.tq), in("delta", g.mats*g.tq)}
	if wantDK {
		params = append(params, out(g.dkName(), g.mats*D*g.tk))
	}
	if wantDV {
		params = append(params, out("dv", g.mats*g.tk*D))
	}
	return g.params(params...)
}

// stageT copies rows r0 … r0+n−1 of matrix mat of buf (rows a matrix)
// transposed into sh: sh[dd·rs + r], zero past the matrix's last row; the
// threads read the rows in order.
func (g attnGeom) stageT(sh, buf string, r0 Expr, n, rows, rs, tg int) Stmt {
	return stage(sh, n, g.d, tg,
		func(y, x Expr) Expr { return add(mul(x, i32(rs)), y) },
		func(y, x Expr) Expr { return below(add(r0, y), rows, ceilDiv(rows, n)*n) },
		func(y, x Expr) Expr { return load(buf, add(g.rowAt(vr("mat"), add(r0, y), rows), x)) })
}

// stageKT copies keys k0 … k0+n−1 of matrix mat of kᵀ (or k) into sh as
// h rows of dimensions (zero past d and past the last key):
// sh[dd·stride + j]; the threads read kᵀ's rows in order. Token-major k
// is transposed on the way: at an odd stride, the threads read k's rows
// in order (their stores, a dimension apart, fall in distinct banks);
// else they take keys fastest, reading 16 bytes of a key each where d is
// a multiple of 4, so that their stores are consecutive.
func (g attnGeom) stageKT(sh string, k0 Expr, n, h, stride, tg int) Stmt {
	src := func(j, dd Expr) Expr { return load(g.kName(), g.keyAt(vr("mat"), add(k0, j), dd)) }
	ok := func(j, dd Expr) Expr { return all(below(dd, g.d, h), below(add(k0, j), g.tk, ceilDiv(g.tk, n)*n)) }
	if g.heads > 0 && stride%2 == 1 {
		return stage(sh, n, h, tg, func(y, x Expr) Expr { return add(mul(x, i32(stride)), y) }, ok, src)
	}
	if g.heads > 0 && g.d%4 == 0 {
		e := vr("e_" + sh)
		j, d4 := rem(e, i32(n)), mul(div(e, i32(n)), i32(4))
		names := [4]string{"k_0", "k_1", "k_2", "k_3"}
		var load4, zeros []Stmt
		load4 = append(load4, Load4{g.kName(), g.keyAt(vr("mat"), add(k0, j), d4), names})
		for c := range 4 {
			at := add(mul(add(d4, i32(c)), i32(stride)), j)
			load4 = append(load4, store(sh, at, vr(names[c])))
			zeros = append(zeros, store(sh, at, flt(0)))
		}
		body := load4
		if c := ok(j, d4); c != nil {
			body = []Stmt{If{Cond: c, Then: load4, Else: zeros}}
		}
		return For{"e_" + sh, lidE, i32(n * h / 4), i32(tg), body}
	}
	return stage(sh, h, n, tg,
		func(y, x Expr) Expr { return add(mul(y, i32(stride)), x) },
		func(y, x Expr) Expr { return ok(x, y) },
		func(y, x Expr) Expr { return src(x, y) })
}

// stageRows copies rows r0 … r0+n−1 of matrix mat of buf (rows a matrix)
// into sh as rows of w ≥ d (zero past d and past the last row):
// sh[r·stride + dd].
func (g attnGeom) stageRows(sh, buf string, r0 Expr, n, rows, w, stride, tg int) Stmt {
	return stage(sh, n, w, tg,
		func(y, x Expr) Expr { return add(mul(y, i32(stride)), x) },
		func(y, x Expr) Expr { return all(below(x, g.d, w), below(add(r0, y), rows, ceilDiv(rows, n)*n)) },
		func(y, x Expr) Expr { return load(buf, add(g.rowAt(vr("mat"), add(r0, y), rows), x)) })
}

// storeDims writes value(c) for the thread's output dimensions c < dn to
// buf[at(dim)], skipping the dimensions past d.
func (b attnBlock) storeDims(d int, buf string, at func(dim Expr) Expr, value func(c int) Expr) []Stmt {
	var s []Stmt
	for c := 0; c < b.dn; c++ {
		st := store(buf, at(b.col(c)), value(c))
		if b.dw() != d {
			st = when(lt(b.col(c), i32(d)), st)
		}
		s = append(s, st)
	}
	return s
}

// fwdBlock is the forward's: queries owned, keys streamed; qᵀ, kᵀ (later
// the probabilities), v and the partial maxima and sums in threadgroup
// memory.
func (g attnGeom) fwdBlock() attnBlock {
	return g.block(g.tq, g.tk, true, func(b attnBlock) int {
		return g.d*b.rs() + max(g.d*b.cols, b.cols*b.rs()) + b.cols*b.dw() + 2*b.rows*b.ct
	})
}

// attentionFwdKernel is the fused forward: o and lse from q, kᵀ and v
// (the package comment above says how).
func attentionFwdKernel(g attnGeom) *Kernel {
	b := g.fwdBlock()
	R, C, D, rs, dw := b.rows, b.cols, g.d, b.rs(), b.dw()
	tg := b.threads()
	blocks, tiles := ceilDiv(g.tq, R), ceilDiv(g.tk, C)
	// partial is the threadgroup index of row a's partial of thread x
	partial := func(a int, x Expr) Expr { return add(mul(row(a), i32(b.ct)), x) }
	// fold reads row a's ct partials of array sh, four at a time, into
	// register r in order
	fold := func(r, sh string, a int, f func(acc, x Expr) Expr) Stmt {
		pn := [4]string{nm(sh+"_", 0), nm(sh+"_", 1), nm(sh+"_", 2), nm(sh+"_", 3)}
		body := []Stmt{Load4{sh, partial(a, vr("x")), pn}}
		for _, v := range pn {
			body = append(body, set(r, f(vr(r), vr(v))))
		}
		return For{"x", i32(0), i32(b.ct), i32(4), body}
	}
	body := []Stmt{
		Shared{"sq", D * rs}, Shared{"sk", max(D*C, C*rs)}, Shared{"sv", C * dw},
		Shared{"smax", R * b.ct}, Shared{"ssum", R * b.ct},
	}
	body = append(body, b.ids("q0", blocks)...)
	body = append(body, g.stageT("sq", "q", vr("q0"), R, g.tq, rs, tg))
	for a := 0; a < attnRows; a++ {
		body = append(body, let(nm("i", a), Int, add(vr("q0"), row(a))), let(nm("m", a), Float, flt(negHuge)), let(nm("l", a), Float, flt(0)))
	}
	body = append(body, zeros4("o", b.dn)...)
	kj := func(c int) Expr { return add(vr("k0"), b.col(c)) }
	vis := func(a, c int) Expr { return g.visible(vr(nm("i", a)), kj(c), blocks*R, tiles*C) }
	tile := []Stmt{
		let("k0", Int, mul(vr("t"), i32(C))),
		Barrier{}, // the previous tile's readers are done
		g.stageKT("sk", vr("k0"), C, D, C, tg),
		g.stageRows("sv", "v", vr("k0"), C, g.tk, dw, dw, tg),
		Barrier{},
	}
	// the micro-tile of scores, masked and scaled, and each row's maximum
	tile = append(tile, zeros4("s", b.cn)...)
	tile = append(tile, microProduct("dd", D, "sq", func(x Expr) Expr { return rowsAt(x, rs) },
		"sk", func(x Expr, c int) Expr { return add(mul(x, i32(C)), b.col(c)) }, b.wide(), b.cn, "s"))
	for a := 0; a < attnRows; a++ {
		mx := nm("mx", a)
		tile = append(tile, let(mx, Float, flt(negHuge)))
		for c := 0; c < b.cn; c++ {
			s := nm("s", a, c)
			tile = append(tile,
				set(s, masked(vis(a, c), mul(vr(s), flt(g.scale)), flt(negHuge))),
				set(mx, call(FnMax, vr(mx), vr(s))))
		}
		tile = append(tile, store("smax", partial(a, vr("tx")), vr(mx)))
	}
	tile = append(tile, Barrier{})
	// the block's new maxima; the probabilities, by dropout, over kᵀ
	for a := 0; a < attnRows; a++ {
		mt := nm("mt", a)
		tile = append(tile,
			let(mt, Float, vr(nm("m", a))),
			fold(mt, "smax", a, func(acc, x Expr) Expr { return call(FnMax, acc, x) }),
			let(nm("ls", a), Float, flt(0)))
	}
	for c := 0; c < b.cn; c++ {
		var ps [4]Expr
		for a := 0; a < attnRows; a++ {
			p, keep := nm("p", a, c), nm("keep", a, c)
			tile = append(tile,
				let(p, Float, masked(vis(a, c), call(FnExp, sub(vr(nm("s", a, c)), vr(nm("mt", a)))), flt(0))),
				set(nm("ls", a), add(vr(nm("ls", a)), vr(p))))
			tile = append(tile, g.keep(keep, vr(nm("i", a)), kj(c))...)
			ps[a] = mul(vr(p), vr(keep))
		}
		tile = append(tile, Store4{"sk", rowsAt(b.col(c), rs), ps})
	}
	for a := 0; a < attnRows; a++ {
		tile = append(tile, store("ssum", partial(a, vr("tx")), vr(nm("ls", a))))
	}
	tile = append(tile, Barrier{})
	// the online softmax's correction, then o += p·v
	for a := 0; a < attnRows; a++ {
		corr, lsum := nm("corr", a), nm("lsum", a)
		tile = append(tile,
			let(corr, Float, call(FnExp, sub(vr(nm("m", a)), vr(nm("mt", a))))),
			let(lsum, Float, flt(0)),
			fold(lsum, "ssum", a, add),
			set(nm("l", a), add(mul(vr(nm("l", a)), vr(corr)), vr(lsum))),
			set(nm("m", a), vr(nm("mt", a))))
		for c := 0; c < b.dn; c++ {
			tile = append(tile, set(nm("o", a, c), mul(vr(nm("o", a, c)), vr(corr))))
		}
	}
	tile = append(tile, microProduct("j", C, "sk", func(x Expr) Expr { return rowsAt(x, rs) },
		"sv", func(x Expr, c int) Expr { return add(mul(x, i32(dw)), b.col(c)) }, b.wide(), b.dn, "o"))
	loopBody := tile
	if g.causal {
		// the tiles past the block's last query hold no visible key
		loopBody = []Stmt{If{Cond: lt(mul(vr("t"), i32(C)), add(vr("q0"), i32(R))), Then: tile}}
	}
	body = append(body, For{"t", i32(0), i32(tiles), i32(1), loopBody})
	for a := 0; a < attnRows; a++ {
		i, inv := vr(nm("i", a)), nm("inv", a)
		norm, lse := g.rowEnd(inv, vr(nm("l", a)), func() Expr { return add(vr(nm("m", a)), call(FnLog, vr(nm("l", a)))) })
		fin := []Stmt{norm}
		fin = append(fin, b.storeDims(D, "o", func(dim Expr) Expr { return add(g.rowAt(vr("mat"), i, g.tq), dim) },
			func(c int) Expr { return mul(vr(nm("o", a, c)), vr(inv)) })...)
		fin = append(fin, when(eq(vr("tx"), i32(0)), store("lse", add(mul(vr("mat"), i32(g.tq)), i), lse)))
		body = append(body, when(lt(i, i32(g.tq)), fin...))
	}
	n := g.mats * g.tq * D
	return &Kernel{
		Doc:         fmt.Sprintf("fused attention, %s: %d queries × %d keys a tile, 4×%d scores and 4×%d outputs a thread", g, R, C, b.cn, b.dn),
		Params:      g.params(in("q", n), in(g.kName(), g.mats*D*g.tk), in("v", g.mats*g.tk*D), out("o", n), out("lse", g.mats*g.tq)),
		Threadgroup: tg, Groups: g.mats * blocks, Body: body,
	}
}

// attnDeltaRows is the delta kernel's query rows a threadgroup: 16 rows
// of 16 threads, each thread summing the products of dimensions lane,
// lane+16, … (16 threads read a row's 64 consecutive bytes), and the
// row's first thread the 16 partial sums in order.
const attnDeltaRows = 16

// attentionDeltaKernel is the backward's first step: delta = rowsum(do∘o).
func attentionDeltaKernel(g attnGeom) *Kernel {
	rows, D := g.mats*g.tq, g.d
	ps := attnCols + 1 // odd: a row's 16 partials in 16 banks
	inRows := lt(vr("row"), i32(rows))
	at := add(mul(vr("row"), i32(D)), vr("k"))
	if g.heads > 0 {
		// row = mat·tq + i
		at = add(g.rowAt(div(vr("row"), i32(g.tq)), rem(vr("row"), i32(g.tq)), g.tq), vr("k"))
	}
	body := []Stmt{
		Shared{"spart", attnDeltaRows * ps},
		let("r", Int, div(lidE, i32(attnCols))),
		let("lane", Int, rem(lidE, i32(attnCols))),
		let("row", Int, add(mul(tgidE, i32(attnDeltaRows)), vr("r"))),
		let("acc", Float, flt(0)),
		when(inRows, For{"k", vr("lane"), i32(D), i32(attnCols), []Stmt{
			set("acc", add(vr("acc"), mul(load("dout", at), load("o", at)))),
		}}),
		store("spart", add(mul(vr("r"), i32(ps)), vr("lane")), vr("acc")),
		Barrier{},
		when(and(inRows, eq(vr("lane"), i32(0))),
			let("sum", Float, flt(0)),
			loop("x", 0, attnCols, 1, set("sum", add(vr("sum"), load("spart", add(mul(vr("r"), i32(ps)), vr("x")))))),
			store("delta", vr("row"), vr("sum"))),
	}
	return &Kernel{
		Doc:         fmt.Sprintf("attention backward's rowsum(do∘o), %d rows of %d: %d rows a threadgroup, 16 threads a row", rows, D, attnDeltaRows),
		Params:      []Param{in("o", rows*D), in("dout", rows*D), out("delta", rows)},
		Threadgroup: attnDeltaRows * attnCols, Groups: ceilDiv(rows, attnDeltaRows), Body: body,
	}
}

// bwdProbs declares, for the micro-tile's score s{a}_{c} of query qi(a,
// c) and key kj(a, c) with the query's lse and delta, p{a}_{c} (the
// probability recomputed), keep{a}_{c}, and, with dp{a}_{c} = do·v where
// wantDS, ds{a}_{c} = p·(keep·dp − delta), the gradient of the scaled
// score.
func (g attnGeom) bwdProbs(cols, qTo, kTo int, qi, kj func(a, c int) Expr, lse, delta func(a, c int) Expr, wantDS bool) []Stmt {
	var s []Stmt
	for a := 0; a < attnRows; a++ {
		for c := 0; c < cols; c++ {
			p, keep := nm("p", a, c), nm("keep", a, c)
			s = append(s, let(p, Float, masked(g.visible(qi(a, c), kj(a, c), qTo, kTo), call(FnExp, sub(mul(vr(nm("s", a, c)), flt(g.scale)), lse(a, c))), flt(0))))
			s = append(s, g.keep(keep, qi(a, c), kj(a, c))...)
			if wantDS {
				s = append(s, let(nm("ds", a, c), Float, mul(vr(p), sub(mul(vr(nm("dp", a, c)), vr(keep)), delta(a, c)))))
			}
		}
	}
	return s
}

// bwdKeysBlock is the key kernel's: keys owned, queries streamed; kᵀ and
// vᵀ of the keys, q and do rows of the tile (at an odd stride: the
// threads read them by query and by dimension), p·keep and ds of the
// tile, and its lse and delta in threadgroup memory.
func (g attnGeom) bwdKeysBlock() attnBlock {
	return g.block(g.tk, g.tq, false, func(b attnBlock) int {
		return 2*g.d*b.rows + 2*b.cols*(b.dw()+1) + 2*b.cols*b.rs() + 2*b.cols
	})
}

// attentionBwdKeysKernel writes dkᵀ and dv (either may be left out): a
// threadgroup per block of keys, over every tile of queries that sees
// them; each thread sums its micro-tile of dv_j = Σ_i p_ij·keep_ij·do_i
// and dk_j = scale·Σ_i ds_ij·q_i.
func attentionBwdKeysKernel(g attnGeom, wantDK, wantDV bool) *Kernel {
	b := g.bwdKeysBlock()
	// b.rows are the keys owned, b.cols the queries of a tile
	KB, QB, D, rs, dw := b.rows, b.cols, g.d, b.rs(), b.dw()
	qs := dw + 1
	tg := b.threads()
	blocks, tiles := ceilDiv(g.tk, KB), ceilDiv(g.tq, QB)
	body := []Stmt{
		Shared{"sk", D * KB}, Shared{"sv", D * KB}, Shared{"sq", QB * qs}, Shared{"sdo", QB * qs},
		Shared{"sp", QB * rs}, Shared{"sds", QB * rs}, Shared{"slse", QB}, Shared{"sdelta", QB},
	}
	body = append(body, b.ids("k0", blocks)...)
	body = append(body,
		g.stageKT("sk", vr("k0"), KB, D, KB, tg),
		g.stageT("sv", "v", vr("k0"), KB, g.tk, KB, tg))
	for a := 0; a < attnRows; a++ {
		body = append(body, let(nm("j", a), Int, add(vr("k0"), row(a))))
	}
	if wantDK {
		body = append(body, zeros4("dk", b.dn)...)
	}
	if wantDV {
		body = append(body, zeros4("dv", b.dn)...)
	}
	qrow := add(mul(vr("mat"), i32(g.tq)), add(vr("q0"), vr("e_row")))
	rowIn := below(add(vr("q0"), vr("e_row")), g.tq, tiles*QB)
	guard := func(v Expr) Expr {
		if rowIn == nil {
			return v
		}
		return sel(rowIn, v, flt(0))
	}
	tile := []Stmt{
		let("q0", Int, mul(vr("t"), i32(QB))),
		Barrier{}, // the previous tile's readers are done
		g.stageRows("sq", "q", vr("q0"), QB, g.tq, dw, qs, tg),
		g.stageRows("sdo", "dout", vr("q0"), QB, g.tq, dw, qs, tg),
		For{"e_row", lidE, i32(QB), i32(tg), []Stmt{
			store("slse", vr("e_row"), guard(load("lse", qrow))),
			store("sdelta", vr("e_row"), guard(load("delta", qrow))),
		}},
		Barrier{},
	}
	// the transposed micro-tiles: scores k·q and dp = v·do, keys by queries
	byQuery := func(x Expr, c int) Expr { return add(mul(b.col(c), i32(qs)), x) }
	tile = append(tile, zeros4("s", b.cn)...)
	tile = append(tile, microProduct("dd", D, "sk", func(x Expr) Expr { return rowsAt(x, KB) }, "sq", byQuery, false, b.cn, "s"))
	if wantDK {
		tile = append(tile, zeros4("dp", b.cn)...)
		tile = append(tile, microProduct("dd", D, "sv", func(x Expr) Expr { return rowsAt(x, KB) }, "sdo", byQuery, false, b.cn, "dp"))
	}
	tile = append(tile, g.bwdProbs(b.cn, tiles*QB, blocks*KB,
		func(a, c int) Expr { return add(vr("q0"), b.col(c)) }, func(a, c int) Expr { return vr(nm("j", a)) },
		func(a, c int) Expr { return load("slse", b.col(c)) }, func(a, c int) Expr { return load("sdelta", b.col(c)) }, wantDK)...)
	for c := 0; c < b.cn; c++ {
		var pk, ds [4]Expr
		for a := 0; a < attnRows; a++ {
			pk[a], ds[a] = mul(vr(nm("p", a, c)), vr(nm("keep", a, c))), vr(nm("ds", a, c))
		}
		if wantDV {
			tile = append(tile, Store4{"sp", rowsAt(b.col(c), rs), pk})
		}
		if wantDK {
			tile = append(tile, Store4{"sds", rowsAt(b.col(c), rs), ds})
		}
	}
	tile = append(tile, Barrier{})
	byDim := func(x Expr, c int) Expr { return add(mul(x, i32(qs)), b.col(c)) }
	if wantDV {
		tile = append(tile, microProduct("x", QB, "sp", func(x Expr) Expr { return rowsAt(x, rs) }, "sdo", byDim, false, b.dn, "dv"))
	}
	if wantDK {
		tile = append(tile, microProduct("x", QB, "sds", func(x Expr) Expr { return rowsAt(x, rs) }, "sq", byDim, false, b.dn, "dk"))
	}
	loopBody := tile
	if g.causal {
		// a tile of queries all before the block's first key sees none of it
		loopBody = []Stmt{If{Cond: ge(add(mul(vr("t"), i32(QB)), i32(QB-1)), vr("k0")), Then: tile}}
	}
	body = append(body, For{"t", i32(0), i32(tiles), i32(1), loopBody})
	for a := 0; a < attnRows; a++ {
		j := vr(nm("j", a))
		var fin []Stmt
		if wantDV {
			fin = append(fin, b.storeDims(D, "dv", func(dim Expr) Expr { return add(g.rowAt(vr("mat"), j, g.tk), dim) },
				func(c int) Expr { return vr(nm("dv", a, c)) })...)
		}
		if wantDK {
			fin = append(fin, b.storeDims(D, g.dkName(), func(dim Expr) Expr { return g.keyAt(vr("mat"), j, dim) },
				func(c int) Expr { return mul(vr(nm("dk", a, c)), flt(g.scale)) })...)
		}
		body = append(body, when(lt(j, i32(g.tk)), fin...))
	}
	return &Kernel{
		Doc:    fmt.Sprintf("fused attention backward, dk and dv, %s: %d keys × %d queries a tile, 4×%d scores and 4×%d outputs a thread", g, KB, QB, b.cn, b.dn),
		Params: g.kvBwdParams(wantDK, wantDV), Threadgroup: tg, Groups: g.mats * blocks, Body: body,
	}
}

// bwdQueriesBlock is the query kernel's: queries owned, keys streamed;
// qᵀ and doᵀ of the queries, kᵀ of the tile (at an odd stride: the
// threads read it by key and by dimension), v rows of the tile (odd
// stride) and dsᵀ in threadgroup memory.
func (g attnGeom) bwdQueriesBlock() attnBlock {
	return g.block(g.tq, g.tk, false, func(b attnBlock) int {
		return 2*g.d*b.rs() + b.dw()*(b.cols+1) + b.cols*(g.d|1) + b.cols*b.rs()
	})
}

// attentionBwdQueriesKernel writes dq: a threadgroup per block of queries,
// over every tile of keys they see; each thread sums its micro-tile of
// dq_i = scale·Σ_j ds_ij·k_j.
func attentionBwdQueriesKernel(g attnGeom) *Kernel {
	b := g.bwdQueriesBlock()
	R, C, D, rs, dw := b.rows, b.cols, g.d, b.rs(), b.dw()
	ks, vs := C+1, D|1
	tg := b.threads()
	blocks, tiles := ceilDiv(g.tq, R), ceilDiv(g.tk, C)
	body := []Stmt{
		Shared{"sq", D * rs}, Shared{"sdo", D * rs}, Shared{"sk", dw * ks}, Shared{"sv", C * vs}, Shared{"sds", C * rs},
	}
	body = append(body, b.ids("q0", blocks)...)
	body = append(body,
		g.stageT("sq", "q", vr("q0"), R, g.tq, rs, tg),
		g.stageT("sdo", "dout", vr("q0"), R, g.tq, rs, tg))
	for a := 0; a < attnRows; a++ {
		i := nm("i", a)
		body = append(body,
			let(i, Int, add(vr("q0"), row(a))),
			let(nm("lse", a), Float, sel(lt(vr(i), i32(g.tq)), load("lse", add(mul(vr("mat"), i32(g.tq)), vr(i))), flt(0))),
			let(nm("delta", a), Float, sel(lt(vr(i), i32(g.tq)), load("delta", add(mul(vr("mat"), i32(g.tq)), vr(i))), flt(0))))
	}
	body = append(body, zeros4("dq", b.dn)...)
	tile := []Stmt{
		let("k0", Int, mul(vr("t"), i32(C))),
		Barrier{}, // the previous tile's readers are done
		g.stageKT("sk", vr("k0"), C, dw, ks, tg),
		g.stageRows("sv", "v", vr("k0"), C, g.tk, D, vs, tg),
		Barrier{},
	}
	// the micro-tiles of scores q·k and dp = do·v
	tile = append(tile, zeros4("s", b.cn)...)
	tile = append(tile, zeros4("dp", b.cn)...)
	tile = append(tile,
		microProduct("dd", D, "sq", func(x Expr) Expr { return rowsAt(x, rs) }, "sk", func(x Expr, c int) Expr { return add(mul(x, i32(ks)), b.col(c)) }, false, b.cn, "s"),
		microProduct("dd", D, "sdo", func(x Expr) Expr { return rowsAt(x, rs) }, "sv", func(x Expr, c int) Expr { return add(mul(b.col(c), i32(vs)), x) }, false, b.cn, "dp"))
	tile = append(tile, g.bwdProbs(b.cn, blocks*R, tiles*C,
		func(a, c int) Expr { return vr(nm("i", a)) }, func(a, c int) Expr { return add(vr("k0"), b.col(c)) },
		func(a, c int) Expr { return vr(nm("lse", a)) }, func(a, c int) Expr { return vr(nm("delta", a)) }, true)...)
	for c := 0; c < b.cn; c++ {
		var ds [4]Expr
		for a := 0; a < attnRows; a++ {
			ds[a] = vr(nm("ds", a, c))
		}
		tile = append(tile, Store4{"sds", rowsAt(b.col(c), rs), ds})
	}
	tile = append(tile, Barrier{},
		microProduct("j", C, "sds", func(x Expr) Expr { return rowsAt(x, rs) }, "sk", func(x Expr, c int) Expr { return add(mul(b.col(c), i32(ks)), x) }, false, b.dn, "dq"))
	loopBody := tile
	if g.causal {
		loopBody = []Stmt{If{Cond: lt(mul(vr("t"), i32(C)), add(vr("q0"), i32(R))), Then: tile}}
	}
	body = append(body, For{"t", i32(0), i32(tiles), i32(1), loopBody})
	for a := 0; a < attnRows; a++ {
		i := vr(nm("i", a))
		body = append(body, when(lt(i, i32(g.tq)), b.storeDims(D, "dq", func(dim Expr) Expr { return add(g.rowAt(vr("mat"), i, g.tq), dim) },
			func(c int) Expr { return mul(vr(nm("dq", a, c)), flt(g.scale)) })...))
	}
	nq := g.mats * g.tq * D
	return &Kernel{
		Doc:         fmt.Sprintf("fused attention backward, dq, %s: %d queries × %d keys a tile, 4×%d scores and 4×%d outputs a thread", g, R, C, b.cn, b.dn),
		Params:      g.params(in("q", nq), in(g.kName(), g.mats*D*g.tk), in("v", g.mats*g.tk*D), in("dout", nq), in("lse", g.mats*g.tq), in("delta", g.mats*g.tq), out("dq", nq)),
		Threadgroup: tg, Groups: g.mats * blocks, Body: body,
	}
}
