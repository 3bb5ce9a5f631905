package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/rt/npz"
)

// allReaders are every reader, in the emitter's order: the tests' models
// read every format.
var allReaders = []*Reader{Images, NPYArrays, CSV, NPY, NPZ(npz.Open), ImageFolder, IDXFiles, IDX}

// idxReaders are what the emitter lists for a spec of IDX files.
var idxReaders = []*Reader{Images, NPYArrays, IDXFiles, IDX}

// csvReaders are what the emitter lists for a spec of a CSV file.
var csvReaders = []*Reader{NPYArrays, CSV}

// TestPredictReadsThroughTheListedReaders: predict takes the inputs of the
// readers its program lists and no others, and says which it takes.
func TestPredictReadsThroughTheListedReaders(t *testing.T) {
	dir := trainedLin(t)
	// a row of the 16 pixels of a class-0 image, as a CSV file
	row := "1,1,0,0,1,1,0,0,0,0,0,0,0,0,0,0\n"
	if err := os.WriteFile(filepath.Join(dir, "digit.csv"), []byte(row), 0o644); err != nil {
		t.Fatal(err)
	}
	m := newLinearModel()
	for _, in := range []string{"digit.pgm", "data/test-images", "digit.csv"} {
		if code, out, errOut := runModel(t, dir, m, "predict", "--weights", "lin.safetensors", "--limit", "1", in); code != 0 || !strings.Contains(out, "class ") {
			t.Errorf("all readers, predict %s: exit %d\n%s%s", in, code, out, errOut)
		}
	}
	m.meta.Readers = idxReaders
	for _, in := range []string{"digit.pgm", "data/test-images"} {
		if code, out, errOut := runModel(t, dir, m, "predict", "--weights", "lin.safetensors", "--limit", "1", in); code != 0 || !strings.Contains(out, "class ") {
			t.Errorf("IDX readers, predict %s: exit %d\n%s%s", in, code, out, errOut)
		}
	}
	code, out, errOut := runModel(t, dir, m, "predict", "--weights", "lin.safetensors", "digit.csv")
	want := "(predict takes PNG, JPEG or PGM images, a .npy array or an IDX images file)"
	if code == 0 || !strings.Contains(errOut, "digit.csv") || !strings.Contains(errOut, want) {
		t.Errorf("IDX readers, predict digit.csv: exit %d, want an error naming the file and %q\n%s%s", code, want, out, errOut)
	}
	m.meta.Readers = nil
	if code, _, errOut := runModel(t, dir, m, "predict", "--weights", "lin.safetensors", "digit.pgm"); code == 0 || !strings.Contains(errOut, "digit.pgm: not a file this program predicts from (it takes nothing)") {
		t.Errorf("no readers, predict digit.pgm: exit %d\n%s", code, errOut)
	}
}

// TestDatasetReaderMustBeListed: a program opens its dataset only through
// the reader of its format, and names the format it lacks.
func TestDatasetReaderMustBeListed(t *testing.T) {
	dir := sklearnDir(t)
	meta := irisMeta()
	ds, err := openTrainSet(meta, dir, 0)
	if err != nil {
		t.Fatalf("with every reader: %v", err)
	}
	ds.close()
	meta = irisMeta()
	meta.Readers = idxReaders
	if _, err := openTrainSet(meta, dir, 0); err == nil || !strings.Contains(err.Error(), `data format "csv" is not supported by this program`) {
		t.Errorf("without the CSV reader: %v", err)
	}

	// An IDX dataset, for train and test, and eval's --images and --labels.
	lin := trainedLin(t)
	m := newLinearModel()
	if code, out, errOut := runModel(t, lin, m, "eval", "--data", "data", "--weights", "lin.safetensors"); code != 0 {
		t.Errorf("eval with every reader: exit %d\n%s%s", code, out, errOut)
	}
	m.meta.Readers = csvReaders
	for _, args := range [][]string{
		{"eval", "--data", "data", "--weights", "lin.safetensors"},
		{"eval", "--images", "data/test-images", "--labels", "data/test-labels", "--weights", "lin.safetensors"},
		{"train", "--data", "data", "--epochs", "1", "--quiet", "--out", "other.safetensors"},
		{"sample", "--data", "data", "x.png"},
	} {
		if code, _, errOut := runModel(t, lin, m, args...); code != exitFailure || !strings.Contains(errOut, `data format "idx" is not supported by this program`) {
			t.Errorf("%s without the IDX files' reader: exit %d: %s", args[0], code, errOut)
		}
	}
}

// TestSampleNeedsIDXFiles: sample writes out an image of IDX files, and
// says so to the program of another format.
func TestSampleNeedsIDXFiles(t *testing.T) {
	lin := trainedLin(t)
	m := newLinearModel()
	m.meta.Data = DataSpec{Format: "csv"}
	m.meta.Readers = allReaders
	if code, _, errOut := runModel(t, lin, m, "sample", "--data", "data", "x.png"); code != exitUsage || !strings.Contains(errOut, "sample writes an image of the spec's IDX files, but this model reads csv data") {
		t.Errorf("sample of a CSV model: exit %d: %s", code, errOut)
	}
}
