package app

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/mlbuild/mlbuild/rt/csvdata"
	"github.com/mlbuild/mlbuild/rt/jsontext"
)

// DataSpec is the spec's dataset block for the formats other than IDX
// (whose file names stay in Defaults): where the samples are, how a CSV
// file is laid out, what the labels mean and what preprocessing training
// fits. The zero value means IDX, classification, no preprocessing.
type DataSpec struct {
	Format             string // "csv", "npy", "npz", "imagefolder" or "text"; "" or "idx" for IDX files
	Task               string // "classification" or "regression"
	Train, TrainLabels string
	Test, TestLabels   string
	TestSplit          float64 // fraction of Train held out as the test set when Test is ""
	Header             bool
	SkipRows           int
	Delimiter          string
	Label, Drop        []Column
	ClassNames         []string
	Resize             bool // imagefolder, idx: resample images of another size
	Pad                bool // idx: centre images in zeros of the input's size
	// Normalize maps each image channel c to (v - mean[c]) / std[c], with
	// the spec's values (NormalizeMean, NormalizeStd) or, when
	// NormalizeFit, those of the training split; what was applied is
	// stored with the weights.
	Normalize                   bool
	NormalizeFit                bool
	NormalizeMean, NormalizeStd []float64
	// FeaturesArray and LabelsArray name the arrays of an npz archive.
	FeaturesArray, LabelsArray string
	// Files are a text dataset's files, joined in order, and Tokens its
	// token mode ("char" or "byte"); TestSplit is then the fraction at
	// the text's end that is the validation split. Documents, when not
	// "", is the separator of documents mode (textdata.Options.Documents):
	// each sample is a document padded with the id classes−1.
	Files              []string
	Tokens             string
	Documents          string
	Standardize        bool // per-feature standardisation of the inputs
	StandardizeTargets bool // regression: standardised targets
	// SkipBadImages (train's --skip-bad-images) leaves out, with a
	// warning on Warn for each, the files of an image folder whose header
	// cannot be read or whose size does not fit; otherwise they are
	// refused before training. Set by the command line, not the spec.
	SkipBadImages bool
	Warn          io.Writer
}

// Column picks a CSV column by header name or, when Name is "", by index.
type Column struct {
	Name  string
	Index int
}

// regression reports whether the model predicts real values: the spec's
// task, or a regression loss without a dataset block.
func (m *Meta) regression() bool {
	if m.Data.Task != "" {
		return m.Data.Task == "regression"
	}
	return m.Defaults.Loss == "mae" || m.Defaults.Loss == "huber"
}

// format is the data format, "idx" when the spec names none.
func (m *Meta) format() string {
	if m.Data.Format == "" {
		return "idx"
	}
	return m.Data.Format
}

// csvColumns is the most columns a row of the spec's CSV file has: the
// model's input values, the label columns and the dropped ones. It bounds
// what the reader takes of each line (csvdata.Options.MaxColumns).
func (m *Meta) csvColumns() int {
	return m.inputSize() + max(len(m.Data.Label), 1) + len(m.Data.Drop)
}

// csvOptions translates the spec's CSV layout for the reader; labels says
// whether the file holds the label columns.
func (d *DataSpec) csvOptions(labels bool) csvdata.Options {
	o := csvdata.Options{SkipRows: d.SkipRows, Header: d.Header}
	if d.Delimiter != "" {
		o.Delimiter = []rune(d.Delimiter)[0]
	}
	if labels {
		for _, c := range d.Label {
			o.Labels = append(o.Labels, csvdata.Column{Name: c.Name, Index: c.Index})
		}
		if len(o.Labels) == 0 {
			o.Labels = []csvdata.Column{{Index: -1}}
		}
	}
	for _, c := range d.Drop {
		o.Drop = append(o.Drop, csvdata.Column{Name: c.Name, Index: c.Index})
	}
	return o
}

// record is what training learned about the data besides the weights: the
// standardisation statistics and the order of string classes. It is stored
// in the weights file's metadata, so that eval and predict apply exactly
// what training did.
type record struct {
	mean, std   []float32 // per input feature; nil without standardisation
	cmean, cstd []float32 // per image channel; nil without normalisation
	tmean, tstd []float32 // per regression target; nil without
	classNames  []string  // string classes in index order; nil for integer labels
	vocab       string    // a text dataset's vocabulary (textdata.Vocab's String); "" for the others
}

// Metadata keys of a record.
const (
	mdMean       = "mlbuild.standardize.mean"
	mdStd        = "mlbuild.standardize.std"
	mdTargetMean = "mlbuild.targets.mean"
	mdTargetStd  = "mlbuild.targets.std"
	mdClasses    = "mlbuild.classes"
	mdChanMean   = "mlbuild.normalize.mean"
	mdChanStd    = "mlbuild.normalize.std"
)

// metadata adds the record to a weights file's metadata.
func (r *record) metadata(md map[string]string) {
	if r == nil {
		return
	}
	put := func(key string, v []float32) {
		if v == nil {
			return
		}
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = strconv.FormatFloat(float64(x), 'g', -1, 32)
		}
		md[key] = "[" + strings.Join(parts, ",") + "]"
	}
	put(mdMean, r.mean)
	put(mdStd, r.std)
	put(mdTargetMean, r.tmean)
	put(mdTargetStd, r.tstd)
	put(mdChanMean, r.cmean)
	put(mdChanStd, r.cstd)
	if r.vocab != "" {
		md[mdVocab] = r.vocab
	}
	if r.classNames != nil {
		j := jsontext.NewWriter("")
		j.Strings(r.classNames)
		md[mdClasses] = string(j.Bytes())
	}
}

// readRecord reads a record from a weights file's metadata and checks it
// against what the spec says training fits; path names the file.
func readRecord(meta *Meta, path string, md map[string]string) (*record, error) {
	r := &record{}
	get := func(key string, want int, needed bool) ([]float32, error) {
		s, ok := md[key]
		if !ok {
			if needed {
				return nil, fmt.Errorf("%s holds no %s: the spec standardises or normalises, so the weights must carry the statistics training applied (train them with this program)", path, key)
			}
			return nil, nil
		}
		v, ok := parseNumbers(s)
		if !ok || len(v) != want {
			return nil, fmt.Errorf("%s: metadata %s is %.60q; want a list of %d numbers", path, key, s, want)
		}
		out := make([]float32, want)
		for i, x := range v {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, fmt.Errorf("%s: metadata %s has a non-finite value", path, key)
			}
			out[i] = float32(x)
		}
		return out, nil
	}
	var err error
	d := &meta.Data
	if r.mean, err = get(mdMean, meta.inputSize(), d.Standardize); err != nil {
		return nil, err
	}
	if r.std, err = get(mdStd, meta.inputSize(), d.Standardize); err != nil {
		return nil, err
	}
	targets := d.StandardizeTargets && meta.regression()
	if r.tmean, err = get(mdTargetMean, meta.Classes, targets); err != nil {
		return nil, err
	}
	if r.tstd, err = get(mdTargetStd, meta.Classes, targets); err != nil {
		return nil, err
	}
	// Fitted channel statistics must come with the weights; the spec's
	// fixed values apply when the weights carry none (imported weights).
	fit := d.Normalize && d.NormalizeFit
	if r.cmean, err = get(mdChanMean, meta.channels(), fit); err != nil {
		return nil, err
	}
	if r.cstd, err = get(mdChanStd, meta.channels(), fit); err != nil {
		return nil, err
	}
	if d.Normalize && !fit && (r.cmean == nil || r.cstd == nil) {
		r.cmean, r.cstd = float32s(d.NormalizeMean), float32s(d.NormalizeStd)
	}
	for c, v := range r.cstd {
		if v <= 0 {
			return nil, fmt.Errorf("%s: metadata %s: channel %d has deviation %v; it must be positive", path, mdChanStd, c, v)
		}
	}
	if s, ok := md[mdClasses]; ok {
		names, ok := parseStrings(s)
		if !ok || len(names) > meta.Classes {
			return nil, fmt.Errorf("%s: metadata %s is %.60q; want a list of at most %d class names", path, mdClasses, s, meta.Classes)
		}
		r.classNames = names
	}
	if d.Format == "text" {
		if r.vocab = md[mdVocab]; r.vocab == "" {
			return nil, fmt.Errorf("%s holds no %s: a text model's weights must carry the vocabulary of the text they were trained on (train them with this program)", path, mdVocab)
		}
	}
	return r, nil
}

// parseNumbers reads a JSON array of numbers (null: none).
func parseNumbers(s string) ([]float64, bool) {
	v, err := jsontext.Parse([]byte(s))
	if err != nil || (v.Kind != jsontext.Array && v.Kind != jsontext.Null) {
		return nil, false
	}
	out := make([]float64, len(v.Items))
	for i, x := range v.Items {
		f, err := strconv.ParseFloat(x.Text, 64)
		if x.Kind != jsontext.Number || err != nil {
			return nil, false
		}
		out[i] = f
	}
	return out, true
}

// parseStrings reads a JSON array of strings (null: none).
func parseStrings(s string) ([]string, bool) {
	v, err := jsontext.Parse([]byte(s))
	if err != nil || (v.Kind != jsontext.Array && v.Kind != jsontext.Null) {
		return nil, false
	}
	var out []string
	for _, x := range v.Items {
		if x.Kind != jsontext.String {
			return nil, false
		}
		out = append(out, x.Text)
	}
	return out, true
}

// inputSize is the number of values of one sample.
func (m *Meta) inputSize() int {
	n := 1
	for _, d := range m.InputShape {
		n *= d
	}
	return n
}

// channels is the channel count of an image input: the first of three
// axes, or 1.
func (m *Meta) channels() int {
	if len(m.InputShape) == 3 {
		return m.InputShape[0]
	}
	return 1
}

// apply does the input preprocessing of the record to rows samples of x
// (features values each): per-channel normalisation, then per-feature
// standardisation.
func (r *record) apply(x []float32, rows, features int) {
	if r == nil {
		return
	}
	x = x[:rows*features]
	if r.cmean != nil {
		plane := features / len(r.cmean)
		for i := range x {
			c := i % features / plane
			x[i] = (x[i] - r.cmean[c]) / r.cstd[c]
		}
	}
	standardize(x, features, r.mean, r.std)
}

// standardize maps each row of width values to (v - mean)/std in place.
func standardize(x []float32, width int, mean, std []float32) {
	if mean == nil {
		return
	}
	for i := range x {
		j := i % width
		x[i] = (x[i] - mean[j]) / std[j]
	}
}

// unstandardize undoes standardize in place.
func unstandardize(x []float32, width int, mean, std []float32) {
	if mean == nil {
		return
	}
	for i := range x {
		j := i % width
		x[i] = x[i]*std[j] + mean[j]
	}
}

// classLabels names the classes for output: the spec's classNames, the
// string classes training recorded, or the indices.
func classLabels(meta *Meta) []string {
	if len(meta.Data.ClassNames) == meta.Classes {
		return meta.Data.ClassNames
	}
	out := make([]string, meta.Classes)
	for i := range out {
		out[i] = strconv.Itoa(i)
		if meta.rec != nil && i < len(meta.rec.classNames) {
			out[i] = meta.rec.classNames[i]
		}
	}
	return out
}

// dataFiles names the files a command reads from --data, for help texts.
func dataFiles(meta *Meta, train bool) string {
	d := &meta.Data
	if meta.format() == "idx" {
		if train {
			return meta.Defaults.TrainImages + ", " + meta.Defaults.TrainLabels
		}
		return meta.Defaults.TestImages + ", " + meta.Defaults.TestLabels
	}
	if meta.format() == "text" {
		s := strings.Join(d.Files, ", ")
		if !train {
			s += fmt.Sprintf(": the last %g of the text", d.TestSplit)
		}
		return s
	}
	files := []string{d.Train, d.TrainLabels}
	if !train && d.Test != "" {
		files = []string{d.Test, d.TestLabels}
	}
	if files[1] == "" {
		files = files[:1]
	}
	s := strings.Join(files, ", ")
	if !train && d.Test == "" && d.TestSplit > 0 {
		s += fmt.Sprintf(": the %g held out", d.TestSplit)
	}
	return s
}

// trainCorrect counts the rows of a training batch whose predicted class
// is the labelled one; a regression model has no classes and counts none.
func trainCorrect(meta *Meta, out, labels []float32) int {
	if meta.regression() {
		return 0
	}
	return countCorrect(out, labels, meta.Classes)
}

// float32s converts spec values to the float32s the data path applies.
func float32s(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}
