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
var allReaders = []*Reader{Images, NPYArrays, CSV, NPY, NPZ(npz.Open), ImageFolder, IDX}

// idxReaders are what the emitter lists for a spec of IDX files.
var idxReaders = []*Reader{Images, NPYArrays, IDX}

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
}
