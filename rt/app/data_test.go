package app

import (
	"archive/zip"
	"bytes"
	"fmt"
	"image"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/rt/idx"
	"github.com/mlbuild/mlbuild/rt/npy"
)

// sklearnDir finds the CSV data sets of Debian's python3-sklearn that
// `make data` fetches; the tests fail, never skip, without them.
func sklearnDir(t *testing.T) string {
	t.Helper()
	return testDataDir(t, "MLBUILD_SKLEARN_DIR", "sklearn", "iris.csv", "the scikit-learn data sets")
}

// testDataDir is the folder of data that `make data` fetches: $env, else
// data/sub at the repository's top; the test fails when probe is not in it.
func testDataDir(t *testing.T, env, sub, probe, what string) string {
	t.Helper()
	dir := os.Getenv(env)
	if dir == "" {
		dir = filepath.Join("..", "..", "data", sub)
	}
	if _, err := os.Stat(filepath.Join(dir, probe)); err != nil {
		t.Fatalf("%s are not in %s: run `make data` (or set %s): %v", what, dir, env, err)
	}
	return dir
}

// irisMeta is what models/iris.cue tells its program.
func irisMeta() *Meta {
	return &Meta{Name: "iris", InputShape: []int{4}, Classes: 3, Batch: 8, Readers: allReaders,
		Defaults: Defaults{Loss: "softmax_cross_entropy"},
		Data: DataSpec{Format: "csv", Task: "classification", Train: "iris.csv", TestSplit: 0.2, SkipRows: 1,
			Delimiter: ",", Label: []Column{{Index: -1}}, ClassNames: []string{"setosa", "versicolor", "virginica"}, Standardize: true}}
}

// diabetesMeta is what models/diabetes.cue tells its program.
func diabetesMeta() *Meta {
	return &Meta{Name: "diabetes", InputShape: []int{10}, Classes: 1, Batch: 16, Readers: allReaders,
		Defaults: Defaults{Loss: "mse"},
		Data: DataSpec{Format: "csv", Task: "regression", Train: "diabetes_data_raw.csv", TrainLabels: "diabetes_target.csv",
			TestSplit: 0.2, Delimiter: " ", Standardize: true, StandardizeTargets: true}}
}

func all(n int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// TestSplitsPartitionTheFile checks that the training and test splits of a
// testSplit are disjoint, cover the file, and do not depend on anything
// but the file: eval finds the rows training held out.
func TestSplitsPartitionTheFile(t *testing.T) {
	train, test := splitRows(150, 0.2)
	if len(train) != 120 || len(test) != 30 {
		t.Fatalf("split 150 rows into %d and %d, want 120 and 30", len(train), len(test))
	}
	seen := map[int]bool{}
	for _, r := range append(slices.Clone(train), test...) {
		if seen[r] || r < 0 || r >= 150 {
			t.Fatalf("row %d twice or out of range", r)
		}
		seen[r] = true
	}
	train2, test2 := splitRows(150, 0.2)
	if !slices.Equal(train, train2) || !slices.Equal(test, test2) {
		t.Error("the split is not reproducible")
	}
	if slices.Equal(test, all(30)) {
		t.Error("the test rows are the first rows: the split does not shuffle")
	}
}

// TestIrisTrainAndTestSets opens iris as its program does: the training
// split with standardisation fitted on it, the test split with the
// recorded statistics, and checks the statistics, the one-hot labels and
// the metadata round trip.
func TestIrisTrainAndTestSets(t *testing.T) {
	dir := sklearnDir(t)
	meta := irisMeta()
	tr, err := openTrainSet(meta, dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.close()
	if tr.n != 120 || meta.rec == nil || len(meta.rec.mean) != 4 || meta.rec.classNames != nil {
		t.Fatalf("train set: %d rows, record %+v", tr.n, meta.rec)
	}
	x := make([]float32, tr.n*4)
	y := make([]float32, tr.n*3)
	if err := tr.fill(x, y, all(tr.n)); err != nil {
		t.Fatal(err)
	}
	// Standardised with the training rows' own statistics: mean 0, deviation 1.
	for j := 0; j < 4; j++ {
		var s, ss float64
		for r := 0; r < tr.n; r++ {
			s += float64(x[r*4+j])
			ss += float64(x[r*4+j]) * float64(x[r*4+j])
		}
		if mean, sd := s/120, math.Sqrt(ss/120); math.Abs(mean) > 1e-5 || math.Abs(sd-1) > 1e-4 {
			t.Errorf("feature %d standardised to mean %g, deviation %g", j, mean, sd)
		}
	}
	// Iris's petal length has a mean near 3.76 cm over all 150 flowers.
	if m := meta.rec.mean[2]; m < 3.4 || m > 4.1 {
		t.Errorf("petal length mean %v", m)
	}
	counts := make([]float32, 3)
	for r := 0; r < tr.n; r++ {
		var sum float32
		for c := 0; c < 3; c++ {
			counts[c] += y[r*3+c]
			sum += y[r*3+c]
		}
		if sum != 1 {
			t.Fatalf("row %d label is not one-hot: %v", r, y[r*3:r*3+3])
		}
	}
	if counts[0]+counts[1]+counts[2] != 120 || counts[0] < 30 || counts[1] < 30 || counts[2] < 30 {
		t.Errorf("class counts in the training split %v", counts)
	}

	md := map[string]string{}
	meta.rec.metadata(md)
	back, err := readRecord(meta, "w.safetensors", md)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back.mean, meta.rec.mean) || !slices.Equal(back.std, meta.rec.std) {
		t.Errorf("record did not survive the metadata: %v %v, want %v %v", back.mean, back.std, meta.rec.mean, meta.rec.std)
	}
	te, err := openTestSet(meta, dir, back)
	if err != nil {
		t.Fatal(err)
	}
	defer te.close()
	if te.n != 30 {
		t.Errorf("test set has %d rows, want 30", te.n)
	}
	// Without the statistics, eval must refuse instead of guessing.
	if _, err := readRecord(meta, "w.safetensors", map[string]string{}); err == nil || !strings.Contains(err.Error(), "w.safetensors holds no mlbuild.standardize.mean") {
		t.Errorf("missing statistics: %v", err)
	}
}

// TestDiabetesTargets opens diabetes's features and targets from their two
// files and checks the target standardisation.
func TestDiabetesTargets(t *testing.T) {
	dir := sklearnDir(t)
	meta := diabetesMeta()
	tr, err := openTrainSet(meta, dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.close()
	if tr.n != 354 || len(meta.rec.tmean) != 1 {
		t.Fatalf("%d training rows (want 354 of 442), record %+v", tr.n, meta.rec)
	}
	// The diabetes target's mean is 152.1 and deviation 77.0 over all rows.
	if m, s := meta.rec.tmean[0], meta.rec.tstd[0]; math.Abs(float64(m)-152) > 10 || math.Abs(float64(s)-77) > 8 {
		t.Errorf("target mean %v, deviation %v", m, s)
	}
	x := make([]float32, 3*10)
	y := make([]float32, 3)
	if err := tr.fill(x, y, []int{0, 1, 2}); err != nil {
		t.Fatal(err)
	}
	unstandardize(y, 1, meta.rec.tmean, meta.rec.tstd)
	for _, v := range y {
		if v < 25 || v > 346 || v != float32(math.Round(float64(v))) && math.Abs(float64(v)-math.Round(float64(v))) > 1e-3 {
			t.Errorf("target %v is not one of diabetes's whole-number targets in [25, 346]", v)
		}
	}
}

// TestNPYDataSet writes iris's training split as .npy arrays with this
// package's writer and reads it back as an npy data set.
func TestNPYDataSet(t *testing.T) {
	dir := sklearnDir(t)
	meta := irisMeta()
	meta.Data.Standardize = false
	tr, err := openTrainSet(meta, dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, tr.n*4)
	y := make([]float32, tr.n*3)
	if err := tr.fill(x, y, all(tr.n)); err != nil {
		t.Fatal(err)
	}
	tr.close()
	labels := make([]float32, tr.n)
	for r := range labels {
		for c := 0; c < 3; c++ {
			if y[r*3+c] == 1 {
				labels[r] = float32(c)
			}
		}
	}
	tmp := t.TempDir()
	if err := npy.Write(filepath.Join(tmp, "x.npy"), []int{tr.n, 4}, x); err != nil {
		t.Fatal(err)
	}
	if err := npy.Write(filepath.Join(tmp, "y.npy"), []int{tr.n}, labels); err != nil {
		t.Fatal(err)
	}
	nm := irisMeta()
	nm.Data = DataSpec{Format: "npy", Task: "classification", Train: "x.npy", TrainLabels: "y.npy", Test: "x.npy", TestLabels: "y.npy"}
	ds, err := openTestSet(nm, tmp, &record{})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.close()
	x2 := make([]float32, 2*4)
	y2 := make([]float32, 2*3)
	if err := ds.fill(x2, y2, []int{tr.n - 1, 0}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(x2[:4], x[(tr.n-1)*4:]) || !slices.Equal(y2[3:], y[:3]) {
		t.Errorf("npy rows differ from the CSV rows: %v %v", x2, y2)
	}

	// The same arrays in an .npz archive, under the names the spec gives.
	npzPath := filepath.Join(tmp, "iris.npz")
	f, _ := os.Create(npzPath)
	zw := zip.NewWriter(f)
	for name, file := range map[string]string{"features.npy": "x.npy", "species.npy": "y.npy"} {
		w, _ := zw.Create(name)
		b, _ := os.ReadFile(filepath.Join(tmp, file))
		w.Write(b)
	}
	zw.Close()
	f.Close()
	zm := irisMeta()
	zm.Data = DataSpec{Format: "npz", Task: "classification", Train: "iris.npz", TestSplit: 0.25, FeaturesArray: "features", LabelsArray: "species"}
	zs, err := openTestSet(zm, tmp, &record{})
	if err != nil {
		t.Fatal(err)
	}
	if zs.n != 30 {
		t.Errorf("npz test split: %d samples, want 30 of 120", zs.n)
	}
	zs.close()
	zm.Data.LabelsArray = "y"
	if _, err := openTestSet(zm, tmp, &record{}); err == nil || !strings.Contains(err.Error(), `iris.npz: the archive has no array "y"; it has features, species`) {
		t.Errorf("missing array: %v", err)
	}

	// Labels outside the classes, and arrays that do not pair up.
	labels[7] = 3
	npy.Write(filepath.Join(tmp, "bad.npy"), []int{tr.n}, labels)
	npy.Write(filepath.Join(tmp, "short.npy"), []int{tr.n - 1}, labels[1:])
	for _, c := range []struct{ labels, want string }{
		{"bad.npy", "bad.npy: sample 7 has label 3, not one of the 3 class indices 0 to 2"},
		{"short.npy", "x.npy has 120 samples but " + filepath.Join(tmp, "short.npy") + " has shape (119,)"},
	} {
		nm.Data.TestLabels = c.labels
		if _, err := openTestSet(nm, tmp, &record{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.labels, err, c.want)
		}
	}
}

// TestCSVDataSetErrors checks the errors of a CSV data set that does not
// fit the model.
func TestCSVDataSetErrors(t *testing.T) {
	dir := sklearnDir(t)
	meta := irisMeta()
	meta.InputShape = []int{5}
	if _, err := openTrainSet(meta, dir, 0); err == nil || !strings.Contains(err.Error(), "iris.csv: the rows have 4 feature columns (index 0, index 1, index 2, index 3) but the model takes 5 values per sample (input 5); besides label column(s) index 4") {
		t.Errorf("feature count: %v", err)
	}
	meta = diabetesMeta()
	meta.Data.TrainLabels = "iris.csv"
	meta.Data.Delimiter = ","
	meta.Data.Train = "wine_data.csv"
	meta.Data.SkipRows = 1
	meta.InputShape = []int{14}
	if _, err := openTrainSet(meta, dir, 0); err == nil || !strings.Contains(err.Error(), "iris.csv: the rows have 5 columns but the model reads 1 label column(s) from this file") {
		t.Errorf("labels file: %v", err)
	}
	meta = irisMeta()
	meta.Data.Test, meta.Data.TestSplit = "", 0
	if _, err := openTestSet(meta, dir, &record{}); err == nil || !strings.Contains(err.Error(), "the spec names no test set") {
		t.Errorf("no test set: %v", err)
	}
}

// TestRSquared checks R² against its definition on small cases.
func TestRSquared(t *testing.T) {
	// y = 1, 2, 3; predictions 1, 2, 4: SS_res 1, SS_tot 2.
	if r2 := rSquared([]float64{1}, []float64{6}, []float64{14}, 3); math.Abs(r2-0.5) > 1e-12 {
		t.Errorf("R² = %v, want 0.5", r2)
	}
	// Two targets average: 0.5 and 1.
	if r2 := rSquared([]float64{1, 0}, []float64{6, 6}, []float64{14, 14}, 3); math.Abs(r2-0.75) > 1e-12 {
		t.Errorf("R² = %v, want 0.75", r2)
	}
}

// TestImageFolder lays out real MNIST test digits (classes 0, 1 and 2, ten
// each, from `make data`) as PNG files in class folders and reads them as
// an image-folder data set: classes from the sorted folder names, pixels
// as the IDX file has them, and the errors of an empty class and of an
// image of the wrong size.
func TestImageFolder(t *testing.T) {
	dir := os.Getenv("MLBUILD_MNIST_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "data", "mnist")
	}
	im, err := idx.OpenImages(filepath.Join(dir, "t10k-images-idx3-ubyte"))
	if err != nil {
		t.Fatalf("MNIST is needed (run `make data` or set MLBUILD_MNIST_DIR): %v", err)
	}
	defer im.Close()
	lb, err := idx.OpenLabels(filepath.Join(dir, "t10k-labels-idx1-ubyte"))
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	tmp := t.TempDir()
	names := []string{"one", "two", "zero"} // sorted: one=0, two=1, zero=2
	digitOf := map[string]int{"zero": 0, "one": 1, "two": 2}
	want := map[string][]float32{} // file → pixels
	for _, name := range names {
		os.MkdirAll(filepath.Join(tmp, "digits", name), 0o755)
	}
	counts := map[int]int{}
	for i := 0; i < im.N && len(want) < 30; i++ {
		d := int(lb.Values[i])
		if d > 2 || counts[d] == 10 {
			continue
		}
		counts[d]++
		g := image.NewGray(image.Rect(0, 0, 28, 28))
		copy(g.Pix, im.Image(i))
		var b bytes.Buffer
		png.Encode(&b, g)
		name := []string{"zero", "one", "two"}[d]
		path := filepath.Join(tmp, "digits", name, fmt.Sprintf("%05d.png", i))
		os.WriteFile(path, b.Bytes(), 0o644)
		pix := make([]float32, 28*28)
		im.Batch(pix, []int{i})
		want[path] = pix
	}
	meta := &Meta{Name: "digits", InputShape: []int{1, 28, 28}, Classes: 3, Batch: 8, Readers: allReaders,
		Defaults: Defaults{Loss: "softmax_cross_entropy"},
		Data:     DataSpec{Format: "imagefolder", Task: "classification", Train: "digits", TestSplit: 0.2}}
	tr, err := openTrainSet(meta, tmp, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.close()
	if tr.n != 24 || !slices.Equal(meta.rec.classNames, names) {
		t.Fatalf("%d training images (want 24 of 30), classes %v", tr.n, meta.rec.classNames)
	}
	x := make([]float32, tr.n*784)
	y := make([]float32, tr.n*3)
	if err := tr.fill(x, y, all(tr.n)); err != nil {
		t.Fatal(err)
	}
	src := tr.src.(*subset).src.(*imageFolderSource)
	for k, r := range tr.src.(*subset).rows {
		path := src.files[r]
		class := slices.Index(names, filepath.Base(filepath.Dir(path)))
		if !slices.Equal(x[k*784:(k+1)*784], want[path]) || y[k*3+class] != 1 || digitOf[names[class]] != digitOf[filepath.Base(filepath.Dir(path))] {
			t.Fatalf("%s: pixels or label %v differ", path, y[k*3:k*3+3])
		}
	}
	te, err := openTestSet(meta, tmp, meta.rec)
	if err != nil || te.n != 6 {
		t.Fatalf("test split: %v, %d images", err, te.n)
	}
	te.close()

	// An image of another size is refused when the set is opened (its
	// header is read), naming it; it failed only when its batch came up.
	small := image.NewGray(image.Rect(0, 0, 20, 20))
	var b bytes.Buffer
	png.Encode(&b, small)
	odd := filepath.Join(tmp, "digits", "two", "00000-small.png")
	os.WriteFile(odd, b.Bytes(), 0o644)
	_, err = openTestSet(&Meta{InputShape: []int{1, 28, 28}, Classes: 3, Readers: allReaders, Data: DataSpec{Format: "imagefolder", Test: "digits"}}, tmp, &record{})
	if err == nil || !strings.Contains(err.Error(), odd+": the image is 20x20 pixels") {
		t.Errorf("wrong size: %v", err)
	}
	os.Remove(odd)
	// An empty class folder is refused when the set is opened.
	os.RemoveAll(filepath.Join(tmp, "digits", "one"))
	os.MkdirAll(filepath.Join(tmp, "digits", "one"), 0o755)
	if _, err := openTrainSet(meta, tmp, 0); err == nil || !strings.Contains(err.Error(), filepath.Join(tmp, "digits", "one")+": the class folder holds no images") {
		t.Errorf("empty class: %v", err)
	}
}
