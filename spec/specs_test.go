package spec

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// positioned matches the FILE:LINE:COL prefix every reported problem has.
var positioned = regexp.MustCompile(`^[^:]+\.cue:\d+:\d+: `)

// TestInvalidSpecs checks that every spec in testdata/specs/invalid is
// rejected with positioned errors, one of which contains the words of its
// `// want:` line.
func TestInvalidSpecs(t *testing.T) {
	files, _ := filepath.Glob("../testdata/specs/invalid/*.cue")
	if len(files) < 60 {
		t.Fatalf("only %d invalid specs; want at least 60", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := strings.Cut(string(data), "\n")
			want, ok := strings.CutPrefix(first, "// want: ")
			if !ok {
				t.Fatalf("first line %q is not a // want: comment", first)
			}
			_, err = Load(f)
			if err == nil {
				t.Fatalf("accepted; want an error containing %q", want)
			}
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("error %v is not a spec.Errors", err)
			}
			found := false
			for _, e := range es {
				if !positioned.MatchString(e.Error()) {
					t.Errorf("error without FILE:LINE:COL position: %s", e.Error())
				}
				if strings.Contains(e.Error(), want) {
					found = true
				}
			}
			if !found {
				t.Errorf("errors do not mention %q:\n%s", want, err)
			}
		})
	}
}

// TestValidSpecs checks every spec in testdata/specs/valid, and the
// example models, loads into a Model that keeps the planner's conventions.
func TestValidSpecs(t *testing.T) {
	files, _ := filepath.Glob("../testdata/specs/valid/*.cue")
	if len(files) < 20 {
		t.Fatalf("only %d valid specs; want at least 20", len(files))
	}
	models, _ := filepath.Glob("../models/*.cue")
	files = append(files, models...)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			m, err := Load(f)
			if err != nil {
				t.Fatalf("rejected:\n%v", err)
			}
			if m.Nodes[0].Op != OpInput || m.Nodes[0].Name != "input" {
				t.Errorf("Nodes[0] = %s %s; want the input", m.Nodes[0].Op, m.Nodes[0].Name)
			}
			seen := map[string]bool{}
			for _, n := range m.Nodes {
				for _, in := range n.Inputs {
					if !seen[in] {
						t.Errorf("node %s reads %s before it is defined", n.Name, in)
					}
				}
				if len(n.OutShape) == 0 || n.Pos.Line == 0 {
					t.Errorf("node %s: out shape %v, pos %v", n.Name, n.OutShape, n.Pos)
				}
				seen[n.Name] = true
			}
			if m.Node(m.Output) == nil {
				t.Errorf("output %q is not a node", m.Output)
			}
		})
	}
}

// TestMNISTModel pins the flagship model's shapes and training settings.
func TestMNISTModel(t *testing.T) {
	m, err := Load("../models/mnist.cue")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range m.Nodes {
		got = append(got, n.Name)
	}
	want := "input conv2d1 relu1 maxpool2d1 conv2d2 relu2 maxpool2d2 flatten1 dense1 relu3 dense2"
	if strings.Join(got, " ") != want {
		t.Errorf("names = %s; want %s", strings.Join(got, " "), want)
	}
	if fl := m.Node("flatten1").OutShape; len(fl) != 1 || fl[0] != 64*7*7 {
		t.Errorf("flatten1 out = %v; want [3136]", fl)
	}
	c := m.Node("conv2d1")
	if c.Kernel != [2]int{5, 5} || c.Padding != [2]int{2, 2} || c.Stride != [2]int{1, 1} || !c.Bias || c.Groups != 1 || c.Rounding != "exact" {
		t.Errorf("conv2d1 = %+v", c)
	}
	tr := m.Training
	if tr.Optimizer.Kind != "adam" || tr.Optimizer.Beta1 != 0.9 || tr.Optimizer.Beta2 != 0.999 || tr.BatchSize != 250 || tr.Epochs != 10 || tr.Schedule.Kind != "cosine" || tr.Schedule.MinLR != 1e-5 || tr.Patience != 3 || tr.ValidationSplit != 0.05 {
		t.Errorf("training = %+v", tr)
	}
	if m.Dataset.Classes != 10 || m.Output != "dense2" || m.DType != "f32" || m.Precision != "f32" {
		t.Errorf("dataset %+v output %s dtype %s precision %s", m.Dataset, m.Output, m.DType, m.Precision)
	}
}

// TestPrecisionBF16 checks that a spec's precision reaches the Model.
func TestPrecisionBF16(t *testing.T) {
	m, err := Load("../bench/models/mlp_bf16.cue")
	if err != nil {
		t.Fatal(err)
	}
	if m.Precision != "bf16" || m.Name != "bench_mlp_bf16" {
		t.Errorf("precision %q name %q; want bf16 bench_mlp_bf16", m.Precision, m.Name)
	}
}

// TestPrecisionTF32 checks that "tf32" is a precision a spec may ask for
// and that it reaches the Model (bench/models/resnet18_cifar_tf32.cue is
// the benchmark's ResNet-18 with it).
func TestPrecisionTF32(t *testing.T) {
	m, err := Load("../bench/models/resnet18_cifar_tf32.cue")
	if err != nil {
		t.Fatal(err)
	}
	if m.Precision != "tf32" || m.Name != "resnet18_cifar_tf32" {
		t.Errorf("precision %q name %q; want tf32 resnet18_cifar_tf32", m.Precision, m.Name)
	}
}

// TestAllErrorsReported checks that independent problems in one spec are
// all reported, not only the first CUE finds: a missing field beside a
// conflict, and a dataset mismatch beside bad training settings.
func TestAllErrorsReported(t *testing.T) {
	const src = `package p

import "github.com/mlbuild/mlbuild/schema"

schema.#Spec & {
	name: "m"
	model: {
		input: [1, 28, 28]
		layers: [
			{op: "flatten"},
			{op: "dense", units: 16},
			{op: "relu"},
			{op: "dense", units: 10},
			{op: "conv2d", outChannels: 4},
			{op: "flatten"},
		]
	}
	training: {optimizer: {kind: "adam", lr: -1}, epochs: 1, batchSize: 0}
	dataset: {trainImages: "a", trainLabels: "b", testImages: "c", classes: 12, imageShape: [1, 28, 28]}
}
`
	_, err := LoadBytes(filepath.Join(t.TempDir(), "multi.cue"), []byte(src))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		"multi.cue:14:4: layer conv2d1: needs a [channels, height, width] input but gets 10 from dense2",
		"multi.cue:18:43: training.optimizer.lr is -1 but must be >0",
		"multi.cue:18:70: training.batchSize is 0 but must be >=1",
		"missing required field dataset.testLabels",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("errors do not mention %q:\n%s", want, err)
		}
	}
}

// TestDatasetDecoded checks that the dataset blocks of the CSV examples
// reach the Model whole: format, task, files, layout and columns.
func TestDatasetDecoded(t *testing.T) {
	iris, err := Load("../models/iris.cue")
	if err != nil {
		t.Fatal(err)
	}
	d := iris.Dataset
	if d.Format != "csv" || d.Task != "classification" || d.Train != "iris.csv" || d.SkipRows != 1 || d.Header ||
		d.Delimiter != "," || d.TestSplit != 0.2 || d.Classes != 3 || !d.Standardize ||
		len(d.Label) != 1 || d.Label[0] != (Column{Index: -1}) || len(d.Drop) != 0 ||
		strings.Join(d.ClassNames, ",") != "setosa,versicolor,virginica" {
		t.Errorf("iris dataset decoded as %+v", d)
	}
	diab, err := Load("../models/diabetes.cue")
	if err != nil {
		t.Fatal(err)
	}
	d = diab.Dataset
	if d.Format != "csv" || d.Task != "regression" || d.Targets != 1 || d.TrainLabels != "diabetes_target.csv" ||
		d.Delimiter != " " || !d.Standardize || !d.StandardizeTargets || diab.Training.Loss != "mse" {
		t.Errorf("diabetes dataset decoded as %+v", d)
	}
	faces, err := Load("../models/faces.cue")
	if err != nil {
		t.Fatal(err)
	}
	d = faces.Dataset
	if d.Format != "imagefolder" || d.Train != "faces" || d.TestSplit != 0.25 || fmt.Sprint(d.ImageShape) != "[1 25 25]" ||
		d.Resize || d.Normalize == nil || !d.Normalize.Fit || d.Normalize.Mean != nil {
		t.Errorf("faces dataset decoded as %+v (normalize %+v)", d, d.Normalize)
	}
	given, err := LoadBytes("given.cue", []byte(`package p
import "github.com/mlbuild/mlbuild/schema"
schema.#Spec & {
	name: "m"
	model: {input: [3, 8, 8], layers: [{op: "flatten"}, {op: "dense", units: 2}]}
	training: {optimizer: {kind: "adam", lr: 1e-3}, epochs: 1, batchSize: 8}
	dataset: {format: "imagefolder", train: "t", classes: 2, imageShape: [3, 8, 8], resize: true,
		normalize: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]}}
}`))
	if err != nil {
		t.Fatal(err)
	}
	text, err := LoadBytes("text.cue", []byte(`package p
import "github.com/mlbuild/mlbuild/schema"
schema.#Spec & {
	name: "m"
	model: {input: [16], layers: [{op: "dense", units: 65}]}
	training: {optimizer: {kind: "adam", lr: 1e-3}, epochs: 1, batchSize: 8}
	dataset: {format: "text", files: ["a.txt", "c.txt"], classes: 65}
}`))
	if err != nil {
		t.Fatal(err)
	}
	if d := text.Dataset; d.Format != "text" || fmt.Sprint(d.Files) != "[a.txt c.txt]" || d.Tokens != "char" || d.TestSplit != 0.1 || d.Task != "classification" || d.Classes != 65 {
		t.Errorf("text dataset decoded as %+v", d)
	}
	if n := given.Dataset.Normalize; n == nil || n.Fit || fmt.Sprint(n.Mean, n.Std) != "[0.485 0.456 0.406] [0.229 0.224 0.225]" || !given.Dataset.Resize {
		t.Errorf("given normalisation decoded as %+v", n)
	}
}
