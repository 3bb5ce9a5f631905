package app

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/mlbuild/mlbuild/rt/cpu"
	"github.com/mlbuild/mlbuild/rt/csvdata"
	"github.com/mlbuild/mlbuild/rt/imageio"
	"github.com/mlbuild/mlbuild/rt/npy"
)

// predictOptions are the flags of `predict`.
type predictOptions struct {
	weights, output string
	limit, top      int
	threads         int
	resize, json    bool
	force           bool
}

func predictCmd(m Model, args []string, stdout, stderr io.Writer) error {
	meta := m.Meta()
	o := &predictOptions{}
	fs := newFlags(meta, "predict")
	fs.StringVar(&o.weights, "weights", "", weightsUsage(meta))
	fs.IntVar(&o.limit, "limit", 10, "for a file of many samples (IDX, .npy, CSV): how many to print (0: all); --output writes all")
	fs.BoolVar(&o.resize, "resize", false, "resize images whose size differs from the model's input")
	fs.IntVar(&o.top, "top", 1, "classification: how many classes to print per input")
	fs.BoolVar(&o.json, "json", false, "print one JSON object per sample: {\"input\", \"class\", \"label\", \"p\", \"top\"} (regression: {\"input\", \"values\"})")
	fs.StringVar(&o.output, "output", "", "write the raw outputs of every sample (logits, or regression values) to this .npy file instead of printing")
	fs.IntVar(&o.threads, "threads", 0, "use `N` CPU threads (0: all)")
	fs.BoolVar(&o.force, "force", false, "replace --output even when it exists and is not an array predict wrote")
	inputs, err := parseFlags(fs, args, stdout)
	if err != nil {
		return err
	}
	if err := checkThreads(o.threads); err != nil {
		return err
	}
	cpu.SetThreads(o.threads)
	if err := weightsRequired(meta, o.weights, "predict needs --weights FILE (this program has no embedded weights) and at least one INPUT"); err != nil {
		return err
	}
	if len(inputs) == 0 {
		return usageError{fmt.Sprintf("predict needs at least one INPUT (%s)", meta.predictInputs())}
	}
	if !meta.regression() && (o.top < 1 || o.top > meta.Classes) {
		return usageError{fmt.Sprintf("--top must be between 1 and %d", meta.Classes)}
	}
	if o.limit < 0 {
		return usageError{"--limit must not be negative"}
	}
	if o.output != "" && filepath.Ext(o.output) != ".npy" {
		return usageError{fmt.Sprintf("--output %s: the outputs are written as a NumPy array; name a .npy file", o.output)}
	}
	if o.output != "" {
		if err := checkOutputArray(o.output, o.force); err != nil {
			return err
		}
	}
	if err := loadWeights(m, o.weights); err != nil {
		return err
	}
	p := &predictor{m: m, meta: meta, o: o, w: stdout, notes: stderr, names: classLabels(meta)}
	// A bad input is reported and the others are predicted; the command
	// fails at the end (it stopped at the first bad one).
	var failed int
	var lastErr error
	for _, path := range inputs {
		if err := p.file(path); err != nil {
			failed++
			lastErr = err
			if len(inputs) > 1 {
				fmt.Fprintf(stderr, "%s: %v\n", meta.Name, err)
			}
		}
	}
	switch {
	case failed == 0:
	case len(inputs) == 1:
		return lastErr
	case o.output != "":
		return fmt.Errorf("%d of %d inputs could not be predicted (named above); %s was not written, as its rows would not pair with the inputs", failed, len(inputs), o.output)
	default:
		return fmt.Errorf("%d of %d inputs could not be predicted (named above)", failed, len(inputs))
	}
	if o.output != "" {
		shape := []int{p.rows, meta.Classes}
		if len(meta.OutputShape) > 1 {
			shape = append([]int{p.rows}, meta.OutputShape...)
		}
		if err := npy.WriteMarked(o.output, shape, p.out); err != nil {
			return fmt.Errorf("writing %s: %v", o.output, err)
		}
		dims := make([]string, len(shape))
		for i, d := range shape {
			dims[i] = fmt.Sprint(d)
		}
		fmt.Fprintf(stdout, "wrote %s outputs to %s\n", strings.Join(dims, "×"), o.output)
	}
	return nil
}

// predictor runs the inference plan over the samples of each input and
// prints or collects the outputs.
type predictor struct {
	m     Model
	meta  *Meta
	o     *predictOptions
	w     io.Writer
	names []string
	notes io.Writer // stderr, for notes on inputs
	infer *rowInference
	out   []float32 // collected outputs, for --output
	rows  int
}

// file predicts every sample of one input file, by its contents.
func (p *predictor) file(path string) error {
	if err := regularFiles(path); err != nil {
		return err
	}
	head := make([]byte, 6)
	if f, err := os.Open(path); err == nil {
		io.ReadFull(f, head)
		f.Close()
	} else {
		return err
	}
	for _, r := range p.meta.Readers {
		if r.predict == nil {
			continue
		}
		if ok, err := r.predict(p, path, head); ok {
			return err
		}
	}
	return fmt.Errorf("%s: not a file this program predicts from (it takes %s)", path, p.meta.predictInputs())
}

// image predicts one PNG, JPEG, PGM or PPM image, read as the model's
// channels (grey or RGB).
func (p *predictor) image(path string) error {
	c := p.meta.channels()
	if c != 1 && c != 3 {
		return fmt.Errorf("%s: images are read as grey or RGB, but the model input %s has %d channels", path, joinShape(p.meta.InputShape), c)
	}
	pix, ih, iw, err := imageio.LoadChannels(path, c)
	if err != nil {
		return err
	}
	h, w := inputHW(p.meta)
	if p.meta.Data.Resize {
		p.o.resize = true // the spec resamples its images; so does predict
	}
	pix, err = imageio.FitChannels(pix, c, ih, iw, h, w, p.o.resize)
	if err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	if len(pix) != p.meta.inputSize() {
		return fmt.Errorf("%s: the image gives %d values but the model takes %d values per sample (input %s)", path, len(pix), p.meta.inputSize(), joinShape(p.meta.InputShape))
	}
	x := p.m.InferInput(true)
	copy(x, pix)
	p.standardize(x, 1)
	p.emit(path, p.m.Infer(true))
	return nil
}

// readCSV reads samples to predict from a CSV file in the spec's layout,
// with or without the label columns.
func (p *predictor) readCSV(path string) (*csvdata.Table, error) {
	d := &p.meta.Data
	want := p.meta.inputSize()
	with, bare := d.csvOptions(d.TrainLabels == ""), d.csvOptions(false)
	with.MaxColumns, bare.MaxColumns = p.meta.csvColumns(), p.meta.csvColumns()
	withLabels, headless, errWith := readPredictCSV(path, with)
	if errWith == nil && withLabels.Features == want {
		p.noteHeadless(path, headless, withLabels)
		return withLabels, nil
	}
	without, headless, err := readPredictCSV(path, bare)
	if err == nil && without.Features == want {
		p.noteHeadless(path, headless, without)
		return without, nil
	}
	if errWith != nil {
		return nil, errWith
	}
	return nil, fmt.Errorf("%s: the rows have %d feature columns (with the label columns taken out) but the model takes %d values per sample (input %s)", path, withLabels.Features, want, joinShape(p.meta.InputShape))
}

// noteHeadless says that a file read as data from its first row had no
// header.
func (p *predictor) noteHeadless(path string, headless bool, tb *csvdata.Table) {
	if headless && p.notes != nil && tb.Rows > 0 {
		fmt.Fprintf(p.notes, "note: %s has no header row (its first row is numbers where the spec expects column names); predicting that row as a sample too\n", path)
	}
}

// readPredictCSV reads a CSV file to predict from with options o. Where
// the spec says the file starts with a header and the file's first row is
// all numbers, the file has none: reading it as the spec says took its
// first sample for the header and dropped it without a word. Such a file
// is read again as data from its first row (headless), when the spec
// selects its columns by position; when it names them, predict refuses
// the file and says why.
func readPredictCSV(path string, o csvdata.Options) (tb *csvdata.Table, headless bool, err error) {
	tb, err = csvdata.Read(path, o)
	if !o.Header {
		return tb, false, err
	}
	refusal := func(first string) error {
		return fmt.Errorf("%s: the first row (%s) is all numbers where the spec expects a header naming the columns; add the training file's header line to it", path, first)
	}
	if err != nil {
		// Column names the spec gives are not in a file without a header.
		bare := csvdata.Options{Delimiter: o.Delimiter, SkipRows: o.SkipRows, MaxColumns: o.MaxColumns}
		if probe, perr := csvdata.Read(path, bare); perr == nil && probe.Rows > 0 {
			return nil, false, refusal(cutValues(probe.X[:probe.Features], 4))
		}
		return nil, false, err
	}
	header := append(slices.Clone(tb.FeatureNames), tb.LabelNames...)
	for i, cell := range header {
		if name, err := strconv.Unquote(cell); err == nil { // the table quotes its names
			header[i] = name
		}
		if _, err := strconv.ParseFloat(strings.TrimSpace(header[i]), 64); err != nil {
			return tb, false, nil // a name: a header
		}
	}
	o.Header = false
	data, err := csvdata.Read(path, o)
	if err != nil {
		return nil, false, refusal(strings.Join(header[:min(len(header), 4)], ", ") + ", …")
	}
	return data, true, nil
}

// cutValues prints the first n values for a message.
func cutValues(v []float32, n int) string {
	parts := make([]string, 0, n+1)
	for _, x := range v[:min(len(v), n)] {
		parts = append(parts, strconv.FormatFloat(float64(x), 'g', -1, 32))
	}
	if len(v) > n {
		parts = append(parts, "…")
	}
	return strings.Join(parts, ", ")
}

// rowsOf predicts n samples that gather copies into a batch buffer, a
// batch at a time; printing stops after --limit unless --output collects.
func (p *predictor) rowsOf(name string, n int, gather func(x []float32, idx []int)) error {
	if p.o.output == "" && p.o.limit > 0 {
		n = min(n, p.o.limit)
	}
	B := p.meta.Batch
	x := p.m.InferInput(false)
	per := len(x) / B
	if p.infer == nil {
		p.infer = newRowInference(p.m)
	}
	idx := make([]int, 0, B)
	for start := 0; start < n; start += B {
		idx = idx[:0]
		for i := start; i < min(start+B, n); i++ {
			idx = append(idx, i)
		}
		gather(x[:len(idx)*per], idx)
		p.standardize(x, len(idx))
		out := p.infer.run(x, len(idx))
		C := len(out) / len(idx)
		for k, r := range idx {
			p.emit(fmt.Sprintf("%s[%d]", name, r), out[k*C:(k+1)*C])
		}
	}
	return nil
}

// standardize applies the input preprocessing training recorded (channel
// normalisation, feature standardisation) to the first rows samples of x.
func (p *predictor) standardize(x []float32, rows int) {
	p.meta.rec.apply(x, rows, p.meta.inputSize())
}

// emit prints one sample's prediction, or collects it for --output.
// Regression values are given in the targets' own units.
func (p *predictor) emit(name string, out []float32) {
	row := slices.Clone(out)
	if p.meta.regression() && p.meta.rec != nil {
		unstandardize(row, len(row), p.meta.rec.tmean, p.meta.rec.tstd)
	}
	if p.o.output != "" {
		p.out = append(p.out, row...)
		p.rows++
		return
	}
	if p.o.json {
		printPredictionJSON(p.w, name, row, p.o.top, p.names, p.meta.regression())
		return
	}
	if p.meta.regression() {
		parts := make([]string, len(row))
		for i, v := range row {
			parts[i] = fmt.Sprintf("%.6g", v)
		}
		fmt.Fprintf(p.w, "%s: %s\n", name, strings.Join(parts, ", "))
		return
	}
	printPrediction(p.w, name, row, p.o.top, p.names)
}

// rankClasses returns the class probabilities of one output row (softmax)
// and the classes from the most probable down, ties in class order.
func rankClasses(logits []float32) ([]float64, []int) {
	probs := softmax64(logits)
	order := make([]int, len(probs))
	for i := range order {
		order[i] = i
	}
	sort.Stable(descending{order, func(k int) float64 { return probs[k] }})
	return probs, order
}

// printPrediction prints the most probable classes of one output row.
func printPrediction(w io.Writer, name string, logits []float32, top int, names []string) {
	probs, order := rankClasses(logits)
	fmt.Fprintf(w, "%s: class %s (p=%.3f)", name, names[order[0]], probs[order[0]])
	for _, c := range order[1:top] {
		fmt.Fprintf(w, ", %s (p=%.3f)", names[c], probs[c])
	}
	fmt.Fprintln(w)
}
