package app

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/mlbuild/mlbuild/rt/idx"
	"github.com/mlbuild/mlbuild/rt/imageio"
	"github.com/mlbuild/mlbuild/rt/npy"
)

// Reader is one kind of data file a program reads: a dataset format that
// train and eval open, the inputs that predict takes, or both. The
// emitter lists in Meta.Readers only the readers a spec needs (its
// dataset's format, and predict's inputs for the model's input); nothing
// else in the program names a reader, so Go's linker leaves out the code
// of the others: a program that reads IDX files carries no CSV parser and
// no zip reader. A new format is a new value here and a line in the
// emitter's table; nothing tests a format's name to choose its code.
type Reader struct {
	// Format is the spec's dataset format whose splits openTrain and
	// openTest open ("csv", "npy", "npz", "imagefolder", "idx"), "" for a
	// reader of predict's inputs only.
	Format string
	// Inputs names the files predict takes through this reader, for its
	// help and messages ("PNG, JPEG or PGM images"); "" for none.
	Inputs string
	// open opens one split of a dataset in Format (but IDX, whose splits
	// are pairs of files that pair opens): the samples of path
	// (and of labelsPath when the labels are a file of their own), with
	// names the class names in index order when known. It returns the
	// samples, their count and the class names it found in string labels.
	open func(meta *Meta, path, labelsPath string, names []string) (source, int, []string, error)
	// predict predicts every sample of one input file whose first bytes
	// are head, reporting false (and doing nothing) when the file is not
	// of this reader's kind.
	predict func(p *predictor, path string, head []byte) (bool, error)
	// openTrain and openTest open the training and the test samples of a
	// dataset in Format (see openTrainSet and openTestSet): openPair's
	// IDX files for IDXFiles, open's splits with the preprocessing they
	// fit and record for the others. They are fields, not one function
	// that switches on the format, so that a program links the code of its
	// own format only: an IDX program has no preprocessing to fit, a CSV
	// program no IDX files to open.
	openTrain func(meta *Meta, dir string, limit int) (*dataset, error)
	openTest  func(meta *Meta, dir string, rec *record) (*dataset, error)
	// pair opens an IDX images file and its labels file and checks that
	// they pair up: the splits of an IDX dataset, which openPair opens from
	// Defaults' file names or eval's --images and --labels, and the images
	// that sample writes out.
	pair func(imagesPath, labelsPath string) (*idx.Images, *idx.Labels, error)
	// generate is the generate command of a text dataset's programs
	// (Text's), so that no other program links the tokenizer and the
	// sampler.
	generate func(m Model, args []string, stdout, stderr io.Writer) error
}

// The readers a program may list. Their order in Meta.Readers is the
// order in which predict asks them about a file; IDX comes last, as it
// takes whatever the others leave and explains what the file is when it
// is not an IDX file.
var (
	// CSV reads a CSV dataset in the spec's layout, and CSV files for
	// predict, with or without the label columns.
	CSV = &Reader{Format: "csv", Inputs: "a CSV file", open: openCSV, openTrain: openTableTrain, openTest: openTableTest, predict: predictCSV}
	// NPY reads a dataset of a features .npy array and a labels one.
	NPY = &Reader{Format: "npy", open: func(meta *Meta, path, labelsPath string, _ []string) (source, int, []string, error) {
		src, n, err := openNPY(meta, path, labelsPath)
		return src, n, nil, err
	}, openTrain: openTableTrain, openTest: openTableTest}
	// NPYArrays reads .npy arrays for predict. It is a reader apart from
	// NPY, which checks a dataset's pair of arrays, so that a program whose
	// dataset is not npy links no more than npy.Open for it.
	NPYArrays = &Reader{Inputs: "a .npy array", predict: predictNPY}
	// ImageFolder reads a folder of class folders of images. Its programs
	// import image/png and image/jpeg, whose decoders rt/imageio uses
	// without importing them (see its decodeRegistered).
	ImageFolder = &Reader{Format: "imagefolder", open: func(meta *Meta, path, _ string, names []string) (source, int, []string, error) {
		return openImageFolder(meta, path, names)
	}, openTrain: openTableTrain, openTest: openTableTest}
	// Images reads PNG, JPEG, PGM and PPM images for predict. Its programs
	// import image/png and image/jpeg, as ImageFolder's do.
	Images = &Reader{Inputs: "PNG, JPEG or PGM images", predict: predictImage}
	// IDX reads IDX images files for predict.
	IDX = &Reader{Inputs: "an IDX images file", predict: predictIDX}
	// IDXFiles reads the pairs of IDX images and labels files of an IDX
	// dataset (a spec's, or the default of a spec without a dataset block,
	// for eval's --images and --labels). It is a reader apart from IDX,
	// predict's, so that the programs of CSV and npy datasets, which take
	// no IDX files, link neither the IDX reader nor its gzip decompressor.
	IDXFiles = &Reader{Format: "idx", openTrain: openIDXTrain, openTest: openIDXTest, pair: openIDXPair}
)

// openIDXPair is IDXFiles' pair.
func openIDXPair(imagesPath, labelsPath string) (*idx.Images, *idx.Labels, error) {
	im, err := idx.OpenImages(imagesPath)
	if err != nil {
		return nil, nil, err
	}
	lb, err := idx.OpenLabels(labelsPath)
	if err != nil {
		im.Close()
		return nil, nil, err
	}
	if err := idx.Pair(im, lb); err != nil {
		im.Close()
		lb.Close()
		return nil, nil, err
	}
	return im, lb, nil
}

// NPZ reads the features and labels arrays of an .npz archive, each opened
// by openArray: rt/npz's Open, which links archive/zip, so that only the
// programs of npz datasets import it (their main.go lists
// app.NPZ(npz.Open)).
func NPZ(openArray func(path, name string, check func(shape []int, elemSize int) error) (*npy.Array, error)) *Reader {
	return &Reader{Format: "npz", open: func(meta *Meta, path, _ string, _ []string) (source, int, []string, error) {
		src, n, err := openNPZ(meta, path, openArray)
		return src, n, nil, err
	}, openTrain: openTableTrain, openTest: openTableTest}
}

// datasetReader is the reader of the spec's dataset format, or an error
// naming the format when the program was built without it.
func (m *Meta) datasetReader() (*Reader, error) {
	for _, r := range m.Readers {
		if r.Format == m.format() && r.openTrain != nil {
			return r, nil
		}
	}
	return nil, fmt.Errorf("data format %q is not supported by this program", m.format())
}

// generator is the generate command of the program's reader that has
// one, nil for none.
func (m *Meta) generator() func(Model, []string, io.Writer, io.Writer) error {
	for _, r := range m.Readers {
		if r.generate != nil {
			return r.generate
		}
	}
	return nil
}

// idxPair opens a pair of IDX files with the program's IDX reader, or
// fails as datasetReader does when the program was built without it.
func (m *Meta) idxPair(imagesPath, labelsPath string) (*idx.Images, *idx.Labels, error) {
	for _, r := range m.Readers {
		if r.pair != nil {
			return r.pair(imagesPath, labelsPath)
		}
	}
	return nil, nil, fmt.Errorf("data format %q is not supported by this program", "idx")
}

// predictInputs lists what predict takes, for its help and messages.
func (m *Meta) predictInputs() string {
	var kinds []string
	for _, r := range m.Readers {
		if r.predict != nil && r.Inputs != "" {
			kinds = append(kinds, r.Inputs)
		}
	}
	switch len(kinds) {
	case 0:
		return "nothing"
	case 1:
		return kinds[0]
	}
	return strings.Join(kinds[:len(kinds)-1], ", ") + " or " + kinds[len(kinds)-1]
}

// predictImage predicts a PNG, JPEG, PGM or PPM image.
func predictImage(p *predictor, path string, head []byte) (bool, error) {
	if !imageio.IsImage(head) {
		return false, nil
	}
	return true, p.image(path)
}

// predictNPY predicts every row of a .npy array.
func predictNPY(p *predictor, path string, head []byte) (bool, error) {
	if !bytes.HasPrefix(head, []byte(npy.Magic)) {
		return false, nil
	}
	a, err := npy.Open(path)
	if err != nil {
		return true, err
	}
	defer a.Close()
	if want := p.meta.inputSize(); a.RowSize() != want || len(a.Shape) == 0 {
		return true, fmt.Errorf("%s: shape %s gives %d values per sample but the model takes %d (input %s)", path, a.ShapeText(), a.RowSize(), want, joinShape(p.meta.InputShape))
	}
	return true, p.rowsOf(path, a.Rows(), func(x []float32, idx []int) { a.Gather(x, idx) })
}

// predictCSV predicts every row of a .csv, .tsv or .txt file.
func predictCSV(p *predictor, path string, _ []byte) (bool, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".csv", ".tsv", ".txt":
	default:
		return false, nil
	}
	tb, err := p.readCSV(path)
	if err != nil {
		return true, err
	}
	w := tb.Features
	return true, p.rowsOf(path, tb.Rows, func(x []float32, idx []int) {
		for k, r := range idx {
			copy(x[k*w:(k+1)*w], tb.X[r*w:(r+1)*w])
		}
	})
}

// predictIDX predicts the images of an IDX images file; it takes any file
// the readers before it left, so that the IDX reader says what the file
// is when it is not an IDX file.
func predictIDX(p *predictor, path string, _ []byte) (bool, error) {
	im, err := idx.OpenImages(path)
	if err != nil {
		return true, fmt.Errorf("%v (predict takes %s)", err, p.meta.predictInputs())
	}
	defer im.Close()
	if im.Rows*im.Cols != p.meta.inputSize() {
		return true, fmt.Errorf("%s: images are %d×%d but the model's input is %s", path, im.Rows, im.Cols, joinShape(p.meta.InputShape))
	}
	return true, p.rowsOf(path, im.N, im.Batch)
}
