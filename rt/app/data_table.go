package app

import (
	"cmp"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mlbuild/mlbuild/rt/cpu"
	"github.com/mlbuild/mlbuild/rt/csvdata"
	"github.com/mlbuild/mlbuild/rt/npy"
)

// testSplitSeed seeds the shuffle that holds out a spec's testSplit. It is
// fixed, not --seed, so that eval finds the same test rows whatever seed
// training used.
const testSplitSeed = 0x7E57_5EED

// openSplit opens the samples of a csv or npy data set: the training split
// (train) or the test split. rec is what training recorded (nil when
// training). It returns the data set and the string class names it found
// in a CSV file, in index order (nil for integer labels).
func openSplit(meta *Meta, dir string, train bool, rec *record) (*dataset, []string, error) {
	d := &meta.Data
	file, labels := d.Train, d.TrainLabels
	heldOut := d.Test == "" && d.TestSplit > 0
	if !train && !heldOut {
		if d.Test == "" {
			return nil, nil, fmt.Errorf("the spec names no test set: give the dataset a test file or a testSplit")
		}
		file, labels = d.Test, d.TestLabels
	}
	names := d.ClassNames
	if names == nil && rec != nil {
		names = rec.classNames
	}
	path := filepath.Join(dir, file)
	labelsPath := ""
	if labels != "" {
		labelsPath = filepath.Join(dir, labels)
	}
	var (
		src   source
		n     int
		found []string
		err   error
	)
	reader, err := meta.datasetReader()
	if err == nil {
		src, n, found, err = reader.open(meta, path, labelsPath, names)
	}
	if err != nil {
		return nil, nil, err
	}
	if heldOut {
		trainRows, testRows := splitRows(n, d.TestSplit)
		rows := trainRows
		if !train {
			rows = testRows
		}
		if len(rows) == 0 {
			src.close()
			return nil, nil, fmt.Errorf("%s: testSplit %v of %d rows leaves no %s rows", path, d.TestSplit, n, map[bool]string{true: "training", false: "test"}[train])
		}
		src, n = &subset{src, rows}, len(rows)
	}
	return &dataset{src: src, n: n, features: meta.inputSize(), width: meta.Classes}, found, nil
}

// splitRows holds out frac of n rows, chosen by a fixed seeded shuffle;
// both parts are in file order.
func splitRows(n int, frac float64) (train, test []int) {
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	rng := cpu.NewRand(mix64(testSplitSeed ^ uint64(n)))
	rng.Shuffle(n, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
	nTest := int(math.Round(frac * float64(n)))
	held := make([]bool, n)
	for _, r := range perm[:nTest] {
		held[r] = true
	}
	for r := 0; r < n; r++ {
		if held[r] {
			test = append(test, r)
		} else {
			train = append(train, r)
		}
	}
	return train, test
}

// subset is some rows of another source, renumbered from 0.
type subset struct {
	src  source
	rows []int
}

func (s *subset) fill(x, y []float32, idx []int) error {
	mapped := make([]int, len(idx))
	for i, r := range idx {
		mapped[i] = s.rows[r]
	}
	return s.src.fill(x, y, mapped)
}

func (s *subset) close() { s.src.close() }

func (s *subset) bytesRead() int64 {
	if c, ok := s.src.(interface{ bytesRead() int64 }); ok {
		return c.bytesRead()
	}
	return 0
}

// memSource is samples held in memory: features and label rows.
type memSource struct {
	x, y            []float32
	features, width int
}

func (s *memSource) fill(x, y []float32, idx []int) error {
	for k, r := range idx {
		copy(x[k*s.features:(k+1)*s.features], s.x[r*s.features:(r+1)*s.features])
		copy(y[k*s.width:(k+1)*s.width], s.y[r*s.width:(r+1)*s.width])
	}
	return nil
}

func (s *memSource) close() {}

// openCSV reads a CSV data set: features and labels from one file, or the
// labels from labelsPath. names are the class names in index order, when
// known; found are the ones derived from string labels.
func openCSV(meta *Meta, path, labelsPath string, names []string) (source, int, []string, error) {
	if err := regularFiles(path, labelsPath); err != nil {
		return nil, 0, nil, err
	}
	d := &meta.Data
	opts := d.csvOptions(labelsPath == "")
	opts.MaxColumns = meta.csvColumns()
	tb, err := csvdata.Read(path, opts)
	if err != nil {
		return nil, 0, nil, err
	}
	if want := meta.inputSize(); tb.Features != want {
		return nil, 0, nil, fmt.Errorf("%s: the rows have %d feature columns (%s) but the model takes %d values per sample (input %s); %s",
			path, tb.Features, summariseNames(tb.FeatureNames), want, joinShape(meta.InputShape), csvColumnsHint(d, tb))
	}
	lt := tb
	if labelsPath != "" {
		k := 1
		if meta.regression() {
			k = meta.Classes
		}
		o := d.csvOptions(false)
		o.Drop = nil
		o.MaxColumns = meta.csvColumns() // bounds the lines; the check below says what is wrong
		for i := 0; i < k; i++ {
			o.Labels = append(o.Labels, csvdata.Column{Index: i})
		}
		if lt, err = csvdata.Read(labelsPath, o); err != nil {
			return nil, 0, nil, err
		}
		if lt.Features != 0 {
			return nil, 0, nil, fmt.Errorf("%s: the rows have %d columns but the model reads %d label column(s) from this file", labelsPath, lt.Features+k, k)
		}
		if lt.Rows != tb.Rows {
			return nil, 0, nil, fmt.Errorf("%s has %d rows but %s has %d: the features and labels must pair up row by row", path, tb.Rows, labelsPath, lt.Rows)
		}
	}
	width := meta.Classes
	var y []float32
	var found []string
	if meta.regression() {
		if len(lt.LabelNames) != width {
			return nil, 0, nil, fmt.Errorf("%s: %d target column(s) (%s) but the model predicts %d values", lt.File, len(lt.LabelNames), strings.Join(lt.LabelNames, ", "), width)
		}
		if y, err = lt.Targets(); err != nil {
			return nil, 0, nil, err
		}
	} else {
		cls, derived, err := lt.Classes(width, names)
		if err != nil {
			return nil, 0, nil, err
		}
		if len(names) == 0 {
			found = derived
		}
		y = make([]float32, tb.Rows*width)
		for r, c := range cls {
			y[r*width+int(c)] = 1
		}
	}
	return &memSource{x: tb.X, y: y, features: tb.Features, width: width}, tb.Rows, found, nil
}

// csvColumnsHint says which columns were taken for what, for a feature
// count that does not match.
func csvColumnsHint(d *DataSpec, tb *csvdata.Table) string {
	var parts []string
	if len(tb.LabelNames) > 0 {
		parts = append(parts, "label column(s) "+strings.Join(tb.LabelNames, ", "))
	}
	if len(d.Drop) > 0 {
		parts = append(parts, fmt.Sprintf("%d dropped", len(d.Drop)))
	}
	hint := "set the dataset's label and drop columns so that the rest are the model's input"
	if len(parts) > 0 {
		return "besides " + strings.Join(parts, " and ") + "; " + hint
	}
	return hint
}

// summariseNames lists column names for a message, cut after a few.
func summariseNames(names []string) string {
	if len(names) > 6 {
		return strings.Join(names[:6], ", ") + fmt.Sprintf(", … %d in all", len(names))
	}
	return strings.Join(names, ", ")
}

// npySource is a features array and a labels array, read by row.
type npySource struct {
	x, y       *npy.Array
	classes    int
	regression bool
}

func (s *npySource) fill(x, y []float32, idx []int) error {
	s.x.Gather(x, idx)
	if s.regression {
		s.y.Gather(y, idx)
		return nil
	}
	w := s.classes
	clear(y[:len(idx)*w])
	for k, r := range idx {
		y[k*w+int(s.y.At(r))] = 1
	}
	return nil
}

func (s *npySource) close() {
	s.x.Close()
	s.y.Close()
}

// openNPY opens a features array and a labels array and checks them
// against each other and the model: shapes, and every label (a class
// index in range, or a finite target) and feature (finite).
func openNPY(meta *Meta, path, labelsPath string) (source, int, error) {
	if err := regularFiles(path, labelsPath); err != nil {
		return nil, 0, err
	}
	x, err := npy.Open(path)
	if err != nil {
		return nil, 0, err
	}
	y, err := npy.Open(labelsPath)
	if err != nil {
		x.Close()
		return nil, 0, err
	}
	return checkArrays(meta, x, y, path, labelsPath)
}

// openNPZ reads the features and labels arrays of an .npz archive with
// openArray (rt/npz's Open), which reads them into memory. Their shapes
// are checked against the model from their headers before their data are
// inflated, so that the memory they take is what the model's shapes need
// for the archive's samples (rows × (input size + label width) elements):
// a hostile archive cannot inflate further.
func openNPZ(meta *Meta, path string, openArray func(path, name string, check func(shape []int, elemSize int) error) (*npy.Array, error)) (source, int, error) {
	if err := regularFiles(path); err != nil {
		return nil, 0, err
	}
	d := &meta.Data
	xName, yName := cmp.Or(d.FeaturesArray, "x"), cmp.Or(d.LabelsArray, "y")
	x, err := openArray(path, xName, func(shape []int, _ int) error {
		if want := meta.inputSize(); len(shape) == 0 || rowSize(shape) != want {
			return fmt.Errorf("shape %s gives %d values per sample but the model takes %d (input %s)", shapeText(shape), rowSize(shape), want, joinShape(meta.InputShape))
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	w := 1
	if meta.regression() {
		w = meta.Classes
	}
	y, err := openArray(path, yName, func(shape []int, _ int) error {
		if len(shape) == 0 || shape[0] != x.Rows() || rowSize(shape) != w {
			return fmt.Errorf("shape %s: the labels must be %d per sample for the %d samples of %s, shape (%d,)%s", shapeText(shape), w, x.Rows(), x.File, x.Rows(), map[bool]string{true: fmt.Sprintf(" or (%d, %d)", x.Rows(), w), false: ""}[w > 1])
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return checkArrays(meta, x, y, x.File, y.File)
}

// rowSize is the values per row of an array of shape (its first axis the
// rows).
func rowSize(shape []int) int {
	n := 1
	for _, d := range shape[min(1, len(shape)):] {
		n *= d
	}
	return n
}

// shapeText writes a shape as NumPy does: (3, 4), (5,).
func shapeText(shape []int) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = strconv.Itoa(d)
	}
	if len(parts) == 1 {
		return "(" + parts[0] + ",)"
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// checkArrays checks a features array and a labels array (named path and
// labelsPath in messages) against each other and the model.
func checkArrays(meta *Meta, x, y *npy.Array, path, labelsPath string) (source, int, error) {
	s := &npySource{x: x, y: y, classes: meta.Classes, regression: meta.regression()}
	fail := func(format string, args ...any) (source, int, error) {
		s.close()
		return nil, 0, fmt.Errorf(format, args...)
	}
	n := x.Rows()
	if len(x.Shape) == 0 {
		return fail("%s: a scalar is not a set of samples; save an array of shape (samples, %s)", path, strings.Trim(strings.ReplaceAll(joinShape(meta.InputShape), "×", ", "), " "))
	}
	if want := meta.inputSize(); x.RowSize() != want {
		return fail("%s: shape %s gives %d values per sample but the model takes %d (input %s)", path, x.ShapeText(), x.RowSize(), want, joinShape(meta.InputShape))
	}
	if y.Rows() != n || len(y.Shape) == 0 {
		return fail("%s has %d samples but %s has shape %s: the features and labels must pair up along the first axis", path, n, labelsPath, y.ShapeText())
	}
	w := meta.Classes
	if s.regression {
		if y.RowSize() != w {
			return fail("%s: shape %s gives %d target(s) per sample but the model predicts %d", labelsPath, y.ShapeText(), y.RowSize(), w)
		}
	} else if y.RowSize() != 1 {
		return fail("%s: shape %s: classification labels are one class index per sample, shape (%d,)", labelsPath, y.ShapeText(), n)
	}
	for i := 0; i < n*y.RowSize(); i++ {
		v := y.At(i)
		switch {
		case math.IsNaN(v) || math.IsInf(v, 0):
			return fail("%s: element %d is %v; labels must be finite", labelsPath, i, v)
		case !s.regression && (v != math.Trunc(v) || v < 0 || v >= float64(w)):
			return fail("%s: sample %d has label %v, not one of the %d class indices 0 to %d", labelsPath, i, v, w, w-1)
		}
	}
	if !x.IsInteger() {
		for i := 0; i < n*x.RowSize(); i++ {
			if v := x.At(i); math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > math.MaxFloat32 {
				return fail("%s: sample %d, value %d is %v; features must be finite float32 numbers", path, i/x.RowSize(), i%x.RowSize(), v)
			}
		}
	}
	return s, n, nil
}

// fitRecord fits the preprocessing the spec asks for on every sample of
// ds (channel normalisation first, then per-feature standardisation of
// the normalised values), reading it in chunks so that a mapped array or
// an image folder is never held whole.
func fitRecord(ds *dataset, meta *Meta, rec *record) error {
	d := &meta.Data
	if d.Normalize {
		if d.NormalizeFit {
			if err := fitChannels(ds, meta.channels(), rec); err != nil {
				return err
			}
		} else {
			rec.cmean, rec.cstd = to32(d.NormalizeMean), to32(d.NormalizeStd)
		}
	}
	doX := d.Standardize
	doY := d.StandardizeTargets && meta.regression()
	if !doX && !doY {
		return nil
	}
	sx, sy := newMoments(ds.features), newMoments(ds.width)
	for pass := 0; pass < 2; pass++ {
		err := eachChunk(ds, func(x, y []float32, rows int) {
			rec.apply(x, rows, ds.features) // the channel normalisation, when fitted
			if doX {
				sx.add(pass, x[:rows*ds.features])
			}
			if doY {
				sy.add(pass, y[:rows*ds.width])
			}
		})
		if err != nil {
			return err
		}
		sx.finish(pass, ds.n)
		sy.finish(pass, ds.n)
	}
	if doX {
		rec.mean, rec.std = sx.mean32(), sx.std32()
	}
	if doY {
		rec.tmean, rec.tstd = sy.mean32(), sy.std32()
	}
	return nil
}

// fitChannels sets rec's per-channel means and deviations (population,
// as torchvision's usual recipe computes them) from every pixel of ds, in
// one pass of float64 sums of values and squares: pixels lie in [0, 1], so
// the difference of the two loses nothing that matters.
func fitChannels(ds *dataset, channels int, rec *record) error {
	sum, sq := make([]float64, channels), make([]float64, channels)
	plane := ds.features / channels
	err := eachChunk(ds, func(x, _ []float32, rows int) {
		for i, v := range x[:rows*ds.features] {
			c := i % ds.features / plane
			sum[c] += float64(v)
			sq[c] += float64(v) * float64(v)
		}
	})
	if err != nil {
		return err
	}
	n := float64(ds.n) * float64(plane)
	rec.cmean, rec.cstd = make([]float32, channels), make([]float32, channels)
	for c := range channels {
		mean := sum[c] / n
		sd := math.Sqrt(max(sq[c]/n-mean*mean, 0))
		if sd < 1e-6 {
			sd = 1 // a constant channel maps to 0
		}
		rec.cmean[c], rec.cstd[c] = float32(mean), float32(sd)
	}
	return nil
}

// eachChunk reads every sample of ds, unpreprocessed, in chunks (through
// the batch loader, so that image folders decode in parallel), and calls
// visit with each chunk's features, labels and row count.
func eachChunk(ds *dataset, visit func(x, y []float32, rows int)) error {
	const chunk = 256
	raw := *ds
	raw.rec = nil
	l := newBatchLoader(&raw, chunk)
	defer l.stop()
	l.start(allIndices(ds.n))
	x := make([]float32, chunk*ds.features)
	y := make([]float32, chunk*ds.width)
	for start := 0; start < ds.n; start += chunk {
		if err := l.next(x, y); err != nil {
			return err
		}
		visit(x, y, min(chunk, ds.n-start))
	}
	return nil
}

// moments accumulates per-column means (pass 0) and squared deviations
// from them (pass 1), in float64.
type moments struct {
	width    int
	sum, ss  []float64
	mean, sd []float64
}

func newMoments(width int) *moments {
	return &moments{width: width, sum: make([]float64, width), ss: make([]float64, width)}
}

func (m *moments) add(pass int, v []float32) {
	for i, x := range v {
		j := i % m.width
		if pass == 0 {
			m.sum[j] += float64(x)
		} else {
			d := float64(x) - m.mean[j]
			m.ss[j] += d * d
		}
	}
}

func (m *moments) finish(pass, n int) {
	if pass == 0 {
		m.mean = make([]float64, m.width)
		for j := range m.mean {
			m.mean[j] = m.sum[j] / float64(max(n, 1))
		}
		return
	}
	m.sd = make([]float64, m.width)
	for j := range m.sd {
		m.sd[j] = math.Sqrt(m.ss[j] / float64(max(n, 1)))
		if m.sd[j] < 1e-12 {
			m.sd[j] = 1 // a constant column maps to 0
		}
	}
}

func (m *moments) mean32() []float32 { return to32(m.mean) }
func (m *moments) std32() []float32  { return to32(m.sd) }

func to32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}
