package spec

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/load"
	"cuelang.org/go/cue/parser"

	"cuelang.org/go/cue/scanner"
	"cuelang.org/go/cue/token"
)

// MaxNesting bounds how deeply a CUE file may nest, so that a pathological
// file cannot exhaust the stack of CUE's parser or evaluator (Go stops a
// program whose stack passes 1 GB with a fatal error, not a panic). Depth
// is counted on CUE's tokens, with CUE's own scanner, so that strings of
// every kind (raw #"…"#, multi-line, interpolated) and comments are skipped
// exactly as the parser skips them. Each of these adds one level:
//
//   - an open bracket, brace or parenthesis, and an interpolation \( … );
//   - a label of a chain a: b: c: …, counted until the chain's field ends;
//   - an operator of a run of operators, as in - - - 1 or !!!!x or >=<=1,
//     each of which nests the expression after it.
//
// A long chain of postfix selectors or binary operators (a.b.c…, 1+1+1…)
// is flat in CUE's parser and stays within the bound on nesting.
const MaxNesting = 200

// nestingMetric is how deeply a file nests: the largest depth reached and
// where it was first reached.
type nestingMetric struct {
	depth     int
	line, col int
}

// measureNesting scans src (named name, for positions) with CUE's scanner
// and returns where it first nests deeper than limit, or ok when it never
// does. Scanning errors are ignored here: the parser reports them.
func measureNesting(name string, src []byte, limit int) (at nestingMetric, ok bool) {
	f := token.NewFile(name, 0, len(src))
	var s scanner.Scanner
	s.Init(f, src, func(token.Pos, string, []interface{}) {}, 0)
	// Each open bracket is a level of the stack; a level's labels holds the
	// length of the label chain written at that level so far.
	type level struct {
		interp bool // the parenthesis of a string interpolation
		labels int
	}
	stack := []level{{}}
	depth := 0 // len(stack)-1 + every level's labels
	run := 0   // the operators just scanned, one after another
	prevInterp := false
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			return nestingMetric{}, true
		}
		top := &stack[len(stack)-1]
		extra := 0
		switch {
		case tok == token.LPAREN || tok == token.LBRACK || tok == token.LBRACE:
			stack = append(stack, level{interp: tok == token.LPAREN && prevInterp})
			depth++
			run = 0
		case tok == token.RPAREN || tok == token.RBRACK || tok == token.RBRACE:
			if len(stack) > 1 {
				depth -= 1 + top.labels
				closed := *top
				stack = stack[:len(stack)-1]
				if closed.interp && tok == token.RPAREN {
					// Resume the string; when it has another \( its next
					// token is that parenthesis.
					rest := s.ResumeInterpolation()
					prevInterp = len(rest) > 0 && rest[len(rest)-1] == '('
					run = 0
					continue
				}
			}
			run = 0
		case tok == token.COLON:
			top.labels++
			depth++
			run = 0
		case tok == token.COMMA:
			depth -= top.labels
			top.labels = 0
			run = 0
		case isNestingOperator(tok):
			run++
			extra = run
		default:
			run = 0
		}
		prevInterp = tok == token.INTERPOLATION && len(lit) > 0 && lit[len(lit)-1] == '('
		if depth+extra > limit {
			p := f.Position(pos)
			return nestingMetric{depth: depth + extra, line: p.Line, col: p.Column}, false
		}
	}
}

// isNestingOperator says whether tok is an operator that may stand before
// an expression (unary, or a binary one followed by a unary one), so that
// a run of them nests.
func isNestingOperator(tok token.Token) bool {
	switch tok {
	case token.ADD, token.SUB, token.MUL, token.POW, token.QUO,
		token.IQUO, token.IREM, token.IDIV, token.IMOD,
		token.AND, token.OR, token.LAND, token.LOR,
		token.NOT, token.EQL, token.NEQ, token.LSS, token.GTR, token.LEQ, token.GEQ,
		token.MAT, token.NMAT:
		return true
	}
	return false
}

// checkNesting rejects a file that nests deeper than MaxNesting (see
// there), positioned where it passes the bound.
func checkNesting(s source) *Error {
	at, ok := measureNesting(s.abs, s.data, MaxNesting)
	if ok {
		return nil
	}
	return &Error{Pos: Pos{File: s.name, Line: at.line, Col: at.col}, Message: fmt.Sprintf("brackets, label chains (a: b: c:) and operator runs (- - x) nest more than %d levels deep here; mlbuild does not evaluate specs this deeply nested", MaxNesting)}
}

// importBounds applies the bounds on size and nesting to every file CUE
// parses for a spec, the files of the packages it imports among them:
// CUE's loader reads those itself, so Load sees them only through the
// loader's ParseFile hook. The spec's own files (already checked) and the
// embedded schema are not counted again.
type importBounds struct {
	mu           sync.Mutex
	skip         map[string]bool // absolute names of files already checked
	total        int             // bytes of the spec's files and every imported file
	found        Errors
	sizeReported bool
}

func newImportBounds(srcs []source, overlay map[string]load.Source) *importBounds {
	b := &importBounds{skip: map[string]bool{}}
	for name := range overlay {
		b.skip[name] = true
	}
	for _, s := range srcs {
		b.total += len(s.data)
	}
	return b
}

// parseFile is the loader's ParseFile hook: it checks an imported file,
// then parses it as the loader would.
func (b *importBounds) parseFile(name string, src interface{}, cfg parser.Config) (*ast.File, error) {
	if data, ok := src.([]byte); ok && !b.skip[name] {
		if err := b.check(name, data); err != nil {
			return nil, err
		}
	}
	return parser.ParseFile(name, src, cfg)
}

func (b *importBounds) check(name string, data []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total += len(data)
	if b.total > MaxSpecBytes {
		msg := fmt.Sprintf("the spec and the packages it imports are larger than %d bytes with this file; mlbuild does not evaluate specs this large", MaxSpecBytes)
		if !b.sizeReported {
			b.sizeReported = true
			b.found = append(b.found, Error{Pos: Pos{File: name, Line: 1, Col: 1}, Message: msg})
		}
		return errors.New(msg)
	}
	if e := checkNesting(source{name: name, abs: name, data: data}); e != nil {
		b.found = append(b.found, *e)
		return errors.New(e.Message)
	}
	return nil
}

// errors returns the problems found, in the order of their files.
func (b *importBounds) errors() Errors {
	b.mu.Lock()
	defer b.mu.Unlock()
	es := slices.Clone(b.found)
	slices.SortStableFunc(es, func(x, y Error) int { return strings.Compare(x.Pos.File, y.Pos.File) })
	return es
}
