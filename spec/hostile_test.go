package spec

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/schema"
)

// hostileSpec is a legal spec with extra, appended at its end.
func hostileSpec(extra string) string {
	return `package p

import "github.com/mlbuild/mlbuild/schema"

schema.#Spec & {
	name: "m"
	model: {input: [4], layers: [{op: "dense", units: 10}]}
	training: {loss: "mse", optimizer: {kind: "adam", lr: 1e-3}, epochs: 1, batchSize: 32}
}
` + extra + "\n"
}

// hostileLine is the line hostileSpec's extra starts on.
const hostileLine = 10

// loadErr loads src as a file of a fresh folder and returns its errors,
// failing the test when it loads.
func loadErr(t *testing.T, src string) Errors {
	t.Helper()
	_, err := LoadBytes(filepath.Join(t.TempDir(), "h.cue"), []byte(src))
	var es Errors
	if !errors.As(err, &es) || len(es) == 0 {
		t.Fatalf("LoadBytes = %v; want Errors", err)
	}
	return es
}

// TestNestingCountsCUETokens covers the nesting the bracket counter used
// to miss, each of which overflowed the stack (fatal error, exit 2): label
// chains, operator runs, brackets after a raw string holding a quote, and
// nested interpolations. It also checks that brackets inside strings do not
// count.
func TestNestingCountsCUETokens(t *testing.T) {
	deep := []struct {
		name, extra string
		line        int // where the bound is passed
	}{
		{"label chain", "_x: " + strings.Repeat("a: ", 100000) + "1", hostileLine},
		{"unary minus run", "_x: " + strings.Repeat("- ", 100000) + "1", hostileLine},
		{"not run", "_x: " + strings.Repeat("!", 100000) + "true", hostileLine},
		{"bound run", "_x: " + strings.Repeat(">=", 50000) + "1", hostileLine},
		{"brackets after a raw string", `_r: #"a"b"#, _x: ` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000), hostileLine},
		{"brackets after a multi-line string", "_r: \"\"\"\n\ta\"b\n\t\"\"\", _x: " + strings.Repeat("(", 100000) + "1" + strings.Repeat(")", 100000), hostileLine + 2},
		{"interpolations", "_x: " + strings.Repeat(`"\(`, 10000) + "1" + strings.Repeat(`)"`, 10000), hostileLine},
		{"chain inside braces", "_x: {" + strings.Repeat("a: {b: ", 150) + "1" + strings.Repeat("}", 300), hostileLine},
	}
	for _, c := range deep {
		t.Run(c.name, func(t *testing.T) {
			es := loadErr(t, hostileSpec(c.extra))
			if len(es) != 1 || !strings.Contains(es[0].Message, "nest more than 200 levels") || es[0].Pos.Line != c.line {
				t.Errorf("want one nesting error on line %d:\n%.500v", c.line, es)
			}
		})
	}
	// Legal: brackets inside strings, comments and interpolated text, and
	// deep nesting just within the bound.
	legal := []string{
		`_s: #"say "` + strings.Repeat("[", 300) + `"#`,
		`_s: "` + strings.Repeat("{", 300) + `" // ` + strings.Repeat("(", 300),
		`_s: "x\("` + strings.Repeat("[", 300) + `")y\(1)z"`,
		"_s: '" + strings.Repeat("[", 300) + "'",
		"_x: " + strings.Repeat("a: ", 150) + "1\n_y: " + strings.Repeat("b: ", 150) + "1",
		"_x: " + strings.Repeat("[", 199) + strings.Repeat("]", 199),
	}
	for i, extra := range legal {
		if _, err := LoadBytes(filepath.Join(t.TempDir(), "ok.cue"), []byte(hostileSpec(extra))); err != nil {
			t.Errorf("legal spec %d rejected: %.500v", i, err)
		}
	}
}

// TestImportedPackagesBounded: the files of a package the spec imports
// get the nesting and size bounds of the spec's own files, at their own
// position.
func TestImportedPackagesBounded(t *testing.T) {
	for _, c := range []struct {
		name, file, want string
	}{
		{"deep", "package lib\nx: " + strings.Repeat("a: ", 100000) + "1\n", "lib.cue:2:"},
		{"large", "package lib\nx: 1\n// " + strings.Repeat("x", MaxSpecBytes) + "\n", "lib.cue:1:1: the spec and the packages it imports are larger than 1048576 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			write := func(name, data string) {
				p := filepath.Join(dir, filepath.FromSlash(name))
				os.MkdirAll(filepath.Dir(p), 0o755)
				if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			write("cue.mod/module.cue", fmt.Sprintf("module: \"x.example/m@v0\"\nlanguage: version: %q\n", schema.LanguageVersion))
			write("lib/lib.cue", c.file)
			src := strings.Replace(hostileSpec("_y: lib.x"), `import "github.com`, "import \"x.example/m/lib\"\nimport \"github.com", 1)
			write("spec.cue", src)
			_, err := Load(filepath.Join(dir, "spec.cue"))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Load = %.500v; want an error with %q", err, c.want)
			}
		})
	}
}

// doublingSpec doubles a string 40 times: 1 KB of spec, 1 TB of string.
func doublingSpec() string {
	var b strings.Builder
	b.WriteString("_s0: \"x\"\n")
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&b, "_s%d: _s%d + _s%d\n", i, i-1, i-1)
	}
	return hostileSpec(b.String())
}

// TestNumbersFloat32Holds: numbers CUE accepts but a float32 cannot hold
// validated, then failed at compile (exit 3 or 70) or ran with a
// meaningless value. Each is refused where it is written, naming its layer.
func TestNumbersFloat32Holds(t *testing.T) {
	spec := func(layer, optimizer, training string) string {
		return `package p

import "github.com/mlbuild/mlbuild/schema"

schema.#Spec & {
	name: "m"
	model: {
		input: [4]
		layers: [{op: "dense", units: 8}, ` + layer + `, {op: "dense", units: 2}]
	}
	training: {loss: "mse", optimizer: {` + optimizer + `}, epochs: 1, batchSize: 32` + training + `}
}
`
	}
	adam := `kind: "adam", lr: 1e-3`
	for _, c := range []struct {
		name, src, want string
	}{
		{"lr 1e39", spec(`{op: "relu"}`, `kind: "adam", lr: 1e39`, ""), "h.cue:11:56: lr 1e39 is beyond the largest number a float32 holds"},
		{"lr 1e-400", spec(`{op: "relu"}`, `kind: "adam", lr: 1e-400`, ""), "h.cue:11:56: lr 1e-400 is closer to 0 than the smallest number a float32 holds"},
		{"lr 1e-40", spec(`{op: "relu"}`, `kind: "adam", lr: 1e-40`, ""), "lr 1e-40 is closer to 0"},
		{"constant 1e39", spec(`{op: "addconst", value: 1e39}`, adam, ""), "h.cue:9:61: layer addconst1: value 1e39 is beyond the largest"},
		{"constant 1e309", spec(`{op: "mulconst", value: 1e309}`, adam, ""), "layer mulconst1: value 1e309 is beyond"},
		{"constant -1e309", spec(`{op: "mulconst", value: -1e309}`, adam, ""), "layer mulconst1: value -1e309 is beyond"},
		{"integer constant", spec(`{op: "addconst", value: 1`+strings.Repeat("0", 40)+`}`, adam, ""), "value 10000000000000000000000000000000000000000 is beyond"},
		{"dropout rate", spec(`{op: "dropout", rate: 0.99999999999999999999}`, adam, ""), "layer dropout1: rate 0.99999999999999999999 rounds to 1 as a float32"},
		{"validation split", spec(`{op: "relu"}`, adam, ", validationSplit: 0.99999999999999999999"), "validationSplit 0.99999999999999999999 rounds to 1"},
		{"beta1", spec(`{op: "relu"}`, adam+", beta1: 0.99999999999999999999", ""), "beta1 0.99999999999999999999 rounds to 1"},
		{"momentum", spec(`{op: "relu"}`, `kind: "sgd", lr: 0.1, momentum: 0.99999999999999999999`, ""), "momentum 0.99999999999999999999 rounds to 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			es := loadErr(t, c.src)
			if !strings.Contains(es.Error(), c.want) {
				t.Errorf("errors lack %q:\n%.1000v", c.want, es)
			}
		})
	}
	// Within float32: the extremes it holds, 0, and a rate just below 1.
	for _, ok := range []string{
		spec(`{op: "addconst", value: 3.4e38}`, `kind: "adam", lr: 1.2e-38`, ""),
		spec(`{op: "mulconst", value: 0}`, adam, ""),
		spec(`{op: "dropout", rate: 0.9999999}`, adam, ", validationSplit: 0.9"),
		spec(`{op: "batchnorm", momentum: 0.99999999999999999999}`, adam, ""),
	} {
		if _, err := LoadBytes(filepath.Join(t.TempDir(), "ok.cue"), []byte(ok)); err != nil {
			t.Errorf("a legal spec was refused: %v\n%s", err, ok)
		}
	}
}
