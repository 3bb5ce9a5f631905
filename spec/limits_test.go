// The sizes these tests use are past what a 32-bit int holds.

//go:build !386 && !arm && !mips && !mipsle

package spec

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestMulAddCount(t *testing.T) {
	for _, c := range []struct {
		a, b         int64
		mul, add     int64
		mulOK, addOK bool
	}{
		{3, 4, 12, 7, true, true},
		{0, math.MaxInt64, 0, math.MaxInt64, true, true},
		{1 << 31, 1 << 31, 1 << 62, 1 << 32, true, true},
		{1 << 32, 1 << 31, math.MaxInt64, 1<<32 + 1<<31, false, true},             // 2^63 does not fit
		{math.MaxInt64, 2, math.MaxInt64, math.MaxInt64, false, false},            // wraps in plain int64
		{4611686018427387904, 4, math.MaxInt64, 4611686018427387908, false, true}, // the dense units
		{-1, 2, math.MaxInt64, math.MaxInt64, false, false},
		{math.MaxInt64 - 1, 1, math.MaxInt64 - 1, math.MaxInt64, true, true},
	} {
		if got, ok := MulCount(c.a, c.b); got != c.mul || ok != c.mulOK {
			t.Errorf("MulCount(%d, %d) = %d, %v; want %d, %v", c.a, c.b, got, ok, c.mul, c.mulOK)
		}
		if got, ok := AddCount(c.a, c.b); got != c.add || ok != c.addOK {
			t.Errorf("AddCount(%d, %d) = %d, %v; want %d, %v", c.a, c.b, got, ok, c.add, c.addOK)
		}
	}
	if n, ok := ShapeCount([]int{1 << 30, 1 << 30, 1 << 30}); ok || n != math.MaxInt64 {
		t.Errorf("ShapeCount(2^90) = %d, %v; want saturated", n, ok)
	}
	if n, ok := ShapeCount([]int{3, 0}); !ok || n != 0 {
		t.Errorf("ShapeCount([3, 0]) = %d, %v; want 0, exact", n, ok)
	}
	if n, ok := ShapeCount([]int{3, -1}); ok || n != math.MaxInt64 {
		t.Errorf("ShapeCount([3, -1]) = %d, %v; want saturated", n, ok)
	}
}

// TestCountsNeverNegative checks that Params and ForwardFLOPs saturate
// instead of wrapping around, on the sizes of issue 10.
func TestCountsNeverNegative(t *testing.T) {
	huge := 4611686018427387904
	nodes := []Node{
		{Name: "d", Op: OpDense, Units: huge, Bias: true, InShapes: [][]int{{huge}}, OutShape: []int{huge}},
		{Name: "c", Op: OpConv2D, OutChannels: huge, Groups: 1, Kernel: [2]int{huge, 3}, Bias: true, InShapes: [][]int{{huge, 8, 8}}, OutShape: []int{huge, 8, 8}},
		{Name: "m", Op: OpMatMul, InShapes: [][]int{{huge, huge}, {huge, huge}}, OutShape: []int{huge, huge}},
		{Name: "p", Op: OpMaxPool2D, Kernel: [2]int{huge, huge}, InShapes: [][]int{{1, 8, 8}}, OutShape: []int{1, 8, 8}},
	}
	for _, n := range nodes {
		if p := n.Params(); p < 0 {
			t.Errorf("%s: Params() = %d", n.Name, p)
		}
		if f := n.ForwardFLOPs(); f != math.MaxInt64 {
			t.Errorf("%s: ForwardFLOPs() = %d; want saturated at MaxInt64", n.Name, f)
		}
	}
}

// TestCheckLimits runs the Go fence on models the schema never lets
// through, and on the batch a planner may be given apart from the spec's.
func TestCheckLimits(t *testing.T) {
	at := Pos{File: "m.cue", Line: 7, Col: 3}
	model := func(nodes ...Node) *Model {
		m := &Model{File: "m.cue", Training: Training{BatchSize: 32}}
		m.Nodes = append([]Node{{Name: "input", Op: OpInput, OutShape: nodes[0].InShapes[0], Pos: Pos{File: "m.cue", Line: 2, Col: 1}}}, nodes...)
		return m
	}
	for _, c := range []struct {
		name  string
		m     *Model
		batch int
		want  string
	}{
		{"issue 10", model(Node{Name: "dense1", Op: OpDense, Units: 4611686018427387904, Bias: true, InShapes: [][]int{{4}}, OutShape: []int{4611686018427387904}, Pos: at}), 32,
			"m.cue:7:3: layer dense1: the output 4611686018427387904 holds 4611686018427387904 elements (more than 2^63 bytes as f32) per sample"},
		{"output at batch", model(Node{Name: "r", Op: OpReLU, InShapes: [][]int{{1 << 35}}, OutShape: []int{1 << 35}, Pos: at}), 64,
			"m.cue:2:1: layer input: at batch 64 the output 34359738368 holds 2199023255552 elements (8796093022208 bytes, 8.00 TiB as f32), more than the 1099511627776 (2^40) mlbuild allows in one tensor; lower the batch size or shrink this layer (and 1 more counts past a bound at this batch, in this or later layers)"},
		{"params", model(Node{Name: "d", Op: OpDense, Units: 1 << 21, InShapes: [][]int{{1 << 20}}, OutShape: []int{1 << 21}, Pos: at}), 1,
			"layer d: 2199023255552 parameters are more than the 1099511627776 (2^40) parameters"},
		{"model params", model(
			Node{Name: "a", Op: OpDense, Units: 1 << 20, InShapes: [][]int{{1<<19 + 1}}, OutShape: []int{1 << 20}},
			Node{Name: "b", Op: OpDense, Units: 1 << 19, InShapes: [][]int{{1 << 20}}, OutShape: []int{1 << 19}, Pos: at}), 1,
			"m.cue:7:3: layer b: with this layer's 549755813888 parameters the model has more than 1099511627776"},
		{"flops at batch", model(Node{Name: "d", Op: OpDense, Units: 1 << 19, InShapes: [][]int{{1 << 20}}, OutShape: []int{1 << 19}, Pos: at}), 1 << 17,
			"layer d: at batch 131072 the forward pass takes 144115188075855872 FLOPs"},
		{"batch", model(Node{Name: "r", Op: OpReLU, InShapes: [][]int{{4}}, OutShape: []int{4}}), 1 << 62,
			"m.cue:2:1: batch size 4611686018427387904 is outside 1..1099511627776"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := CheckLimitsAt(c.m, c.batch)
			var es Errors
			if !errors.As(err, &es) {
				t.Fatalf("CheckLimitsAt = %v; want Errors", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("errors do not mention %q:\n%v", c.want, err)
			}
			if strings.Contains(err.Error(), "-") && regexp.MustCompile(`-\d`).MatchString(err.Error()) {
				t.Errorf("a negative count:\n%v", err)
			}
		})
	}
	ok := model(Node{Name: "d", Op: OpDense, Units: 10, Bias: true, InShapes: [][]int{{784}}, OutShape: []int{10}})
	if err := CheckLimits(ok); err != nil {
		t.Errorf("a small model: %v", err)
	}
}

// TestSchemaBoundsAgree checks that the schema's bounds and #Short are
// the constants of this package.
func TestSchemaBoundsAgree(t *testing.T) {
	src, err := os.ReadFile("../schema/spec.cue")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int64{"#MaxCount": MaxCount, "#MaxFLOPs": MaxFLOPs} {
		m := regexp.MustCompile(`(?m)^` + name + `:\s*([0-9_]+)$`).FindSubmatch(src)
		if m == nil {
			t.Errorf("schema/spec.cue does not define %s", name)
			continue
		}
		got, err := strconv.ParseInt(strings.ReplaceAll(string(m[1]), "_", ""), 10, 64)
		if err != nil || got != want {
			t.Errorf("schema %s = %s; Go has %d", name, m[1], want)
		}
	}
	// #Short, and the layer names written out in model.cue, keep ShortKeep
	// characters of more than ShortMax, as Short does.
	model, err := os.ReadFile("../schema/model.cue")
	if err != nil {
		t.Fatal(err)
	}
	all := string(src) + string(model)
	maxRunes := regexp.MustCompile(`MaxRunes\(\w+, (\d+)\)`).FindAllStringSubmatch(all, -1)
	slices := regexp.MustCompile(`SliceRunes\(\w+, 0, (\d+)\)`).FindAllStringSubmatch(all, -1)
	if len(maxRunes) < 4 || len(slices) < 2 {
		t.Fatalf("found %d MaxRunes and %d SliceRunes in the schema; want #Short and the layer names", len(maxRunes), len(slices))
	}
	for _, m := range maxRunes {
		if m[1] != strconv.Itoa(ShortMax) {
			t.Errorf("schema %s: want %d characters whole, as Short", m[0], ShortMax)
		}
	}
	for _, m := range slices {
		if m[1] != strconv.Itoa(ShortKeep) {
			t.Errorf("schema %s: want %d characters kept, as Short", m[0], ShortKeep)
		}
	}
}

func TestShort(t *testing.T) {
	long := strings.Repeat("é", 10000)
	for _, c := range []struct{ in, short, quoted string }{
		{"dense1", "dense1", `"dense1"`},
		{strings.Repeat("a", 64), strings.Repeat("a", 64), `"` + strings.Repeat("a", 64) + `"`},
		{strings.Repeat("a", 65), strings.Repeat("a", 40) + "… (65 characters)", `"` + strings.Repeat("a", 40) + `…" (65 characters)`},
		{long, strings.Repeat("é", 40) + "… (10000 characters)", `"` + strings.Repeat(`\u00e9`, 40) + `…" (10000 characters)`},
		{"a\nb", "a\nb", `"a\nb"`},
	} {
		if got := Short(c.in); got != c.short {
			t.Errorf("Short(%.20q…) = %q; want %q", c.in, got, c.short)
		}
		if got := Short(Short(c.in)); got != c.short {
			t.Errorf("Short is not idempotent on %.20q…: %q", c.in, got)
		}
		if got := QuoteShort(c.in); got != c.quoted {
			t.Errorf("QuoteShort(%.20q…) = %q; want %q", c.in, got, c.quoted)
		}
	}
	msg := `conflicting values "` + strings.Repeat("x", 500) + `" and int; value ` + strings.Repeat("9", 300) + ` and 12 and "short"`
	want := `conflicting values "` + strings.Repeat("x", 40) + `…" (500 characters) and int; value ` + strings.Repeat("9", 40) + `… (300 characters) and 12 and "short"`
	if got := shortenMessage(msg); got != want {
		t.Errorf("shortenMessage:\n got %s\nwant %s", got, want)
	}
}

// TestLongNamesShortened checks that a spec with a 10,000-character name
// and field is reported in lines of readable length, with the schema's
// #Short and Go's Short agreeing on the layer's name (the message does not
// repeat "layer NAME:").
func TestLongNamesShortened(t *testing.T) {
	name := strings.Repeat("ж", 10000)
	field := strings.Repeat("q", 10000)
	spec := func(specName, layer, loss string) string {
		return `package p

import "github.com/mlbuild/mlbuild/schema"

schema.#Spec & {
	name: "` + specName + `"
	model: {
		input: [4]
		layers: [` + layer + `]
	}
	training: {loss: "` + loss + `", optimizer: {kind: "adam", lr: 1e-3}, epochs: 1, batchSize: 32}
}
`
	}
	dense := `{op: "dense", units: 10}`
	graph := `package p

import "github.com/mlbuild/mlbuild/schema"

schema.#Spec & {
	name: "m"
	model: {
		input: [4]
		nodes: "` + name + `": {op: "relu", inputs: ["` + field + `"]}
	}
	training: {loss: "mse", optimizer: {kind: "adam", lr: 1e-3}, epochs: 1, batchSize: 32}
}
`
	for _, c := range []struct{ src, want string }{
		{spec("m", `{op: "dense", units: 10, name: "`+name+`"}`, "mse"), `layer ` + Short(name) + `: name "` + Short(name) + `" is not a safe identifier`},
		{spec("m", `{op: "dense", units: 10, `+field+`: 1}`, "mse"), `layer dense1: dense layers have no field "` + strings.Repeat("q", 40) + `…" (10000 characters)`},
		{spec("m", `{op: "`+name+`"}, `+dense, "mse"), `unknown op "` + Short(name) + `"`},
		{spec("m", dense, name), `unknown loss "` + Short(name) + `"`},
		{spec(name, dense, "mse"), `model name "` + Short(name) + `" is not a safe identifier`},
		{graph, `layer ` + Short(name) + `: input "` + strings.Repeat("q", 40) + `…" (10000 characters) is not a node of the graph (nodes: ` + Short(name) + `; the model input is "input")`},
	} {
		_, err := LoadBytes(filepath.Join(t.TempDir(), "long.cue"), []byte(c.src))
		var es Errors
		if !errors.As(err, &es) {
			t.Fatalf("LoadBytes = %v; want Errors", err)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("errors do not mention %q:\n%.3000s", c.want, err)
		}
		for _, e := range es {
			line := e.Error()
			if n := len([]rune(line)); n > 600 {
				t.Errorf("a message of %d characters: %.300s…", n, line)
			}
			if strings.Count(line, "layer "+Short(name)) > 1 {
				t.Errorf("the layer name is repeated: %.300s", line)
			}
		}
	}
}

// TestSizeErrorsAlone checks that a count past a bound is reported once,
// where it is written, and not again as a consequence in every check that
// reads it (an illegal batch size leaves the model's batch unknown).
func TestSizeErrorsAlone(t *testing.T) {
	for _, f := range []string{"size_batch.cue", "size_dense_units.cue", "size_kernel.cue", "size_dense_params.cue", "size_conv_flops.cue"} {
		_, err := Load(filepath.Join("../testdata/specs/invalid", f))
		var es Errors
		if !errors.As(err, &es) {
			t.Fatalf("%s: %v; want Errors", f, err)
		}
		if len(es) != 1 {
			t.Errorf("%s: %d errors; want the bound's alone:\n%v", f, len(es), err)
		}
	}
}
