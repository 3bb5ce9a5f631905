package spec

import (
	"fmt"
	"math"
	"math/big"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/token"
)

// CUE numbers are exact decimals of any size; produced programs compute in
// float32. checkNumbers refuses, where the user wrote it, every number of
// the spec that float32 cannot hold: one past float32's largest finite
// value (1e39, ±1e309, which float64 cannot hold either), or one too small
// in magnitude to keep its precision (1e-40 and 1e-400, below float32's
// smallest normal number, which would become 0 or lose digits). The
// fields the schema bounds below 1 (a dropout rate, a split, momentum, a
// beta) are also refused when their value rounds up to 1
// (0.99999999999999999999), which their bound excludes. Without these
// checks such specs validated and then failed to compile or ran with a
// meaningless value.

// belowOne are the fields the schema bounds with <1 (batchnorm's momentum
// may be 1; the optimizer's may not).
var belowOne = map[string]bool{"rate": true, "momentum": true, "beta1": true, "beta2": true, "validationSplit": true, "testSplit": true}

// boundBelowOne says whether the field at path is one of belowOne.
func boundBelowOne(path []string) bool {
	field := path[len(path)-1]
	return belowOne[field] && !(field == "momentum" && path[0] == "model")
}

// checkNumbers walks the regular fields of root (see above).
func checkNumbers(root cue.Value, pos *positions) Errors {
	var es Errors
	var walk func(v cue.Value, path []string)
	walk = func(v cue.Value, path []string) {
		switch v.IncompleteKind() {
		case cue.StructKind:
			it, err := v.Fields()
			if err != nil {
				return
			}
			for it.Next() {
				walk(it.Value(), append(path, it.Selector().String()))
			}
		case cue.ListKind:
			it, err := v.List()
			if err != nil {
				return
			}
			for i := 0; it.Next(); i++ {
				walk(it.Value(), append(path, fmt.Sprint(i)))
			}
		case cue.IntKind, cue.FloatKind, cue.NumberKind:
			if msg := numberProblem(v, path); msg != "" {
				es = append(es, numberError(root, v, path, pos, msg))
			}
		}
	}
	walk(root, nil)
	return es
}

// numberProblem says what is wrong with the number v at path for float32,
// or "" when nothing is (or v is not a concrete number).
func numberProblem(v cue.Value, path []string) string {
	lit, ok := numberLiteral(v)
	if !ok {
		return ""
	}
	x, _, err := big.ParseFloat(lit, 0, 256, big.ToNearestEven)
	if err != nil {
		return ""
	}
	f32, _ := x.Float32()
	abs := math.Abs(float64(f32))
	field := path[len(path)-1]
	shown := lit // as the user wrote it, when they did
	switch n := v.Source().(type) {
	case *ast.BasicLit:
		shown = n.Value
	case *ast.UnaryExpr:
		if b, ok := n.X.(*ast.BasicLit); ok && n.Op == token.SUB {
			shown = "-" + b.Value
		}
	}
	switch {
	case math.IsInf(float64(f32), 0):
		return fmt.Sprintf("%s %s is beyond the largest number a float32 holds (±%g)", field, Short(shown), math.MaxFloat32)
	case x.Sign() != 0 && abs < smallestNormal32:
		return fmt.Sprintf("%s %s is closer to 0 than the smallest number a float32 holds at full precision (%g); use 0 or a larger value", field, Short(shown), smallestNormal32)
	case boundBelowOne(path) && x.Cmp(big.NewFloat(1)) < 0 && f32 >= 1:
		return fmt.Sprintf("%s %s rounds to 1 as a float32, which the bound <1 excludes; the largest a float32 holds below 1 is %v", field, Short(shown), math.Nextafter32(1, 0))
	}
	return ""
}

// smallestNormal32 is float32's smallest normal number, 2^-126.
const smallestNormal32 = 0x1p-126

// numberLiteral is v's value as a decimal literal, exact.
func numberLiteral(v cue.Value) (string, bool) {
	if k := v.Kind(); k != cue.IntKind && k != cue.FloatKind {
		return "", false
	}
	b, err := v.MarshalJSON()
	if err != nil {
		return "", false
	}
	return string(b), true
}

// numberError positions msg at the number, or at its field's place in the
// user's files, and names its layer.
func numberError(root, v cue.Value, path []string, pos *positions, msg string) Error {
	e := Error{Message: msg}
	if p, ok := pos.userPos(v.Pos()); ok {
		e.Pos = p
	} else if p, ok := pos.lookup(path); ok {
		e.Pos = p
	} else {
		e.Pos = pos.firstFile()
	}
	if layer, rest := splitLayerPath(path); layer != nil && len(rest) > 0 {
		e.Layer = layerName(layer, &root)
	}
	return e
}
