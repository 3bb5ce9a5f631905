package app

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/mlbuild/mlbuild/rt/cpu"
	"github.com/mlbuild/mlbuild/rt/idx"
	"github.com/mlbuild/mlbuild/rt/imageio"
)

// source is one data format's samples, read by index: fill writes the
// features of the samples idx into x (as the file holds them, before any
// preprocessing) and their labels into y (one-hot rows of the classes, or
// the regression targets).
type source interface {
	fill(x, y []float32, idx []int) error
	close()
}

// dataset is the samples of one split (training or test) in any format,
// checked against the model, with the preprocessing that training fitted.
type dataset struct {
	src      source
	n        int
	features int     // values per sample: the model's input size
	width    int     // values per label row: classes, or targets
	rec      *record // applied by fill; nil: none
	// images and labels are the IDX files of an IDX data set (nil for the
	// other formats), for what only IDX files have (predict's --limit).
	images *idx.Images
	labels *idx.Labels
	// text is the windows of a text dataset (nil for the other
	// formats), whose split is by position. It is an interface, not a
	// *textSource, so that the programs of other formats do not link
	// the text reader through this field's type.
	text windowed
}

func (d *dataset) close() { d.src.close() }

// fill writes the samples idx, preprocessed, into x and their labels into
// y: the training loop's batches, the evaluation's, and (for the whole
// set at once) a device that keeps the training set in its memory.
func (d *dataset) fill(x, y []float32, idx []int) error {
	if err := d.src.fill(x, y, idx); err != nil {
		return err
	}
	if d.rec != nil {
		d.rec.apply(x, len(idx), d.features)
		standardize(y[:len(idx)*d.width], d.width, d.rec.tmean, d.rec.tstd)
	}
	return nil
}

// windowed is a text dataset's samples: windows of Tokens() tokens,
// split by position.
type windowed interface {
	// positionalSplit is dataset.split for windows: the training windows
	// and the validation ones; seed seeds the training windows.
	positionalSplit(n int, seed int64) (train, val []int)
	// windowTokens is T, the tokens of a window.
	windowTokens() int
	// evaluate is the package's evaluate for these windows, and correct
	// trainCorrect (with the positions that have a label): methods, so
	// that only text programs link them.
	evaluate(m Model, ds *dataset, indices []int, meta *Meta) (evalResult, error)
	correct(meta *Meta, out, labels []float32) (correct, labelled int)
	// resident offers a Resident device the training text whole
	// (residentModel); residentOrder then draws each epoch's windows.
	resident(r Resident) (Resident, error)
	residentOrder(first, steps, bs int) []int
	// sameVocab refuses weights that a run starts from (flag --init or
	// --resume, their file path) whose stored vocabulary (metadata
	// mdVocab, "" for none) is not this text's.
	sameVocab(flag, path, stored string) error
}

// idxSource is a pair of IDX files.
type idxSource struct {
	images  *idx.Images
	labels  *idx.Labels
	classes int
	fit     *idxFit // nil: the images are the model's input as they are
}

func (s *idxSource) fill(x, y []float32, indices []int) error {
	if s.fit == nil {
		s.images.Batch(x, indices)
	} else {
		s.fit.batch(x, s.images, indices)
	}
	s.labels.OneHot(y, indices, s.classes)
	return nil
}

// idxFit converts IDX images (grey, rows×cols) to the model's input
// [channels, h, w], one batch at a time: resampled (resize) or centred in
// zeros (pad), copied to every channel, then normalised per channel.
type idxFit struct {
	channels, h, w int
	pad            bool
	mean, std      []float32 // per channel; nil: no normalisation
}

// newIDXFit is the conversion the spec asks for from rows×cols images, or
// an error naming path when they do not fit the model's input.
func newIDXFit(meta *Meta, path string, rows, cols int) (*idxFit, error) {
	d := &meta.Data
	if !d.Resize && !d.Pad && !d.Normalize {
		return nil, nil
	}
	c := meta.channels()
	h, w := inputHW(meta)
	if c*h*w != meta.inputSize() {
		return nil, fmt.Errorf("%s: the model's input %s is not [channels, height, width]: resize, pad and normalize need one", path, joinShape(meta.InputShape))
	}
	if !d.Resize && !d.Pad && (rows != h || cols != w) {
		return nil, fmt.Errorf("%s: images are %d×%d but the model's input is %s; set resize or pad in the dataset to convert them", path, rows, cols, joinShape(meta.InputShape))
	}
	if d.Pad && (rows > h || cols > w) {
		return nil, fmt.Errorf("%s: images are %d×%d, larger than the model's input %s: pad only enlarges; use resize", path, rows, cols, joinShape(meta.InputShape))
	}
	f := &idxFit{channels: c, h: h, w: w, pad: d.Pad}
	if d.Normalize {
		if len(d.NormalizeMean) != c || len(d.NormalizeStd) != c {
			return nil, fmt.Errorf("%s: normalize gives %d mean(s) and %d deviation(s) for %d channel(s)", path, len(d.NormalizeMean), len(d.NormalizeStd), c)
		}
		f.mean, f.std = float32s(d.NormalizeMean), float32s(d.NormalizeStd)
	}
	return f, nil
}

// batch writes the images at indices, converted, into x.
func (f *idxFit) batch(x []float32, im *idx.Images, indices []int) {
	plane := f.h * f.w
	n := f.channels * plane
	grey := make([]float32, im.Rows*im.Cols)
	for b, i := range indices {
		for j, v := range im.Image(i) {
			grey[j] = float32(v) / 255
		}
		out := x[b*n : (b+1)*n]
		first := out[:plane]
		switch {
		case f.pad:
			clear(first)
			top, left := (f.h-im.Rows)/2, (f.w-im.Cols)/2
			for r := range im.Rows {
				copy(first[(top+r)*f.w+left:], grey[r*im.Cols:(r+1)*im.Cols])
			}
		case im.Rows != f.h || im.Cols != f.w:
			copy(first, imageio.Resize(grey, im.Rows, im.Cols, f.h, f.w))
		default:
			copy(first, grey)
		}
		for c := 1; c < f.channels; c++ {
			copy(out[c*plane:(c+1)*plane], first)
		}
		if f.mean != nil {
			for c := range f.channels {
				m, s := f.mean[c], f.std[c]
				p := out[c*plane : (c+1)*plane]
				for k, v := range p {
					p[k] = (v - m) / s
				}
			}
		}
	}
}

func (s *idxSource) close() {
	s.images.Close()
	s.labels.Close()
}

// openPair opens an images and a labels file (with the program's IDX
// reader, which checks them against each other) and checks them against
// the model's input shape and class count.
func openPair(meta *Meta, imagesPath, labelsPath string) (*dataset, error) {
	if err := regularFiles(imagesPath, labelsPath); err != nil {
		return nil, err
	}
	im, lb, err := meta.idxPair(imagesPath, labelsPath)
	if err != nil {
		return nil, err
	}
	src := &idxSource{images: im, labels: lb, classes: meta.Classes}
	ds := &dataset{src: src, n: im.N, features: im.Rows * im.Cols, width: meta.Classes, images: im, labels: lb}
	fail := func(err error) (*dataset, error) {
		ds.close()
		return nil, err
	}
	if err := lb.Check(meta.Classes); err != nil {
		return fail(err)
	}
	want := meta.inputSize()
	if src.fit, err = newIDXFit(meta, imagesPath, im.Rows, im.Cols); err != nil {
		return fail(err)
	}
	if src.fit != nil {
		ds.features = want
		return ds, nil
	}
	if im.Rows*im.Cols != want {
		return fail(fmt.Errorf("%s: images are %d×%d (%d values) but the model's input is %s (%d values)",
			imagesPath, im.Rows, im.Cols, im.Rows*im.Cols, joinShape(meta.InputShape), want))
	}
	return ds, nil
}

// openTrainSet opens the training samples named by the spec in dir (the
// first limit of them when limit > 0) and fits the preprocessing the spec
// asks for on them, recording it in meta for the weights files, with the
// reader of the spec's dataset format.
func openTrainSet(meta *Meta, dir string, limit int) (*dataset, error) {
	r, err := meta.datasetReader()
	if err != nil {
		return nil, err
	}
	return r.openTrain(meta, dir, limit)
}

// openTestSet opens the test samples named by the spec in dir, with the
// preprocessing that training recorded in rec.
func openTestSet(meta *Meta, dir string, rec *record) (*dataset, error) {
	r, err := meta.datasetReader()
	if err != nil {
		return nil, err
	}
	return r.openTest(meta, dir, rec)
}

// openIDXTrain is openTrainSet for IDX files, which have nothing to fit.
func openIDXTrain(meta *Meta, dir string, limit int) (*dataset, error) {
	d := meta.Defaults
	ds, err := openPair(meta, filepath.Join(dir, d.TrainImages), filepath.Join(dir, d.TrainLabels))
	if err != nil {
		return nil, err
	}
	if limit > 0 && limit < ds.n {
		ds.n = limit
	}
	return ds, nil
}

// openIDXTest is openTestSet for IDX files.
func openIDXTest(meta *Meta, dir string, _ *record) (*dataset, error) {
	d := meta.Defaults
	return openPair(meta, filepath.Join(dir, d.TestImages), filepath.Join(dir, d.TestLabels))
}

// openTableTrain is openTrainSet for the formats that open reads (CSV,
// npy, npz, image folders), whose preprocessing is fitted on the training
// samples.
func openTableTrain(meta *Meta, dir string, limit int) (*dataset, error) {
	ds, names, err := openSplit(meta, dir, true, nil)
	if err != nil {
		return nil, err
	}
	if limit > 0 && limit < ds.n {
		ds.n = limit
	}
	rec := &record{classNames: names}
	if err := fitRecord(ds, meta, rec); err != nil {
		ds.close()
		return nil, err
	}
	ds.rec = rec
	meta.rec = rec
	return ds, nil
}

// openTableTest is openTestSet for the formats that open reads.
func openTableTest(meta *Meta, dir string, rec *record) (*dataset, error) {
	ds, _, err := openSplit(meta, dir, false, rec)
	if err != nil {
		return nil, err
	}
	ds.rec = rec
	return ds, nil
}

// split holds out a seeded random fraction of the images for validation.
func (d *dataset) split(frac float64, seed int64) (train, val []int) {
	if d.text != nil {
		return d.text.positionalSplit(d.n, seed)
	}
	perm := make([]int, d.n)
	for i := range perm {
		perm[i] = i
	}
	nVal := int(frac * float64(d.n))
	if nVal == 0 {
		return perm, nil
	}
	rng := cpu.NewRand(mix64(uint64(seed) ^ 0x5EED5EED))
	rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
	return perm[nVal:], perm[:nVal]
}

// loaderDepth is how many batches the loader keeps filled ahead of the
// training step: enough to hide a slow file, and the bound (with the
// decoding of one batch) on the memory the data takes, whatever the size
// of the data set.
const loaderDepth = 3

// batchLoader fills batches on a background goroutine, up to loaderDepth
// ahead of the one being computed, and copies each into the plan's input
// buffers when asked. The batches are consecutive slices of an order of
// sample indices (the last one may be short).
type batchLoader struct {
	ds    *dataset
	batch int
	free  chan *loadedBatch // buffers ready to be filled
	ready chan *loadedBatch // filled buffers, in order
	quit  chan struct{}     // closed to stop the producer
	done  chan struct{}     // closed when the producer has returned
	// waited is the time next spent blocked on the producer: the part
	// of a run the data did not keep up with.
	waited time.Duration
}

// loadedBatch is one buffer of the loader: a batch's samples and labels,
// or why they could not be read.
type loadedBatch struct {
	x, y []float32
	rows int
	err  error
}

func newBatchLoader(ds *dataset, batch int) *batchLoader {
	l := &batchLoader{ds: ds, batch: batch,
		free: make(chan *loadedBatch, loaderDepth), ready: make(chan *loadedBatch, loaderDepth)}
	for range loaderDepth {
		l.free <- &loadedBatch{x: make([]float32, batch*ds.features), y: make([]float32, batch*ds.width)}
	}
	return l
}

// start begins filling the batches of order, stopping first what an
// earlier start left running.
func (l *batchLoader) start(order []int) {
	l.stop()
	quit, done := make(chan struct{}), make(chan struct{})
	l.quit, l.done = quit, done
	go func() {
		defer close(done)
		for s := 0; s < len(order); s += l.batch {
			var b *loadedBatch
			select {
			case b = <-l.free:
			case <-quit:
				return
			}
			idx := order[s:min(s+l.batch, len(order))]
			b.rows = len(idx)
			b.err = l.ds.fill(b.x[:b.rows*l.ds.features], b.y[:b.rows*l.ds.width], idx)
			l.ready <- b // never blocks: there are loaderDepth buffers
			if b.err != nil {
				return
			}
		}
	}()
}

// next waits for the next batch and copies it into x and y (its rows
// samples and label rows), or returns why it could not be read.
func (l *batchLoader) next(x, y []float32) error {
	t := time.Now()
	var b *loadedBatch
	select {
	case b = <-l.ready:
	case <-l.done:
		select {
		case b = <-l.ready:
		default:
			return errors.New("internal error: the batch loader ran out of batches")
		}
	}
	l.waited += time.Since(t)
	defer func() { l.free <- b }()
	if b.err != nil {
		return b.err
	}
	copy(x, b.x[:b.rows*l.ds.features])
	copy(y, b.y[:b.rows*l.ds.width])
	return nil
}

// stop ends the producer, waiting for a fill under way, so that the files
// it reads are not closed (unmapped) beneath it when training stops early;
// the buffers it filled go back to the pool.
func (l *batchLoader) stop() {
	if l.done == nil {
		return
	}
	close(l.quit)
	<-l.done
	for len(l.ready) > 0 {
		l.free <- <-l.ready
	}
	l.quit, l.done = nil, nil
}

// bytesRead is how many bytes of files the data set has read so far, for
// sources that read files per batch (0 for the others).
func (l *batchLoader) bytesRead() int64 {
	if c, ok := l.ds.src.(interface{ bytesRead() int64 }); ok {
		return c.bytesRead()
	}
	return 0
}

// regularFiles refuses, before anything opens them, paths that are not
// regular files (links are followed): /dev/zero would be read for ever
// and a FIFO waited on for ever, so a dataset or an input must be a file.
// Empty paths are skipped.
func regularFiles(paths ...string) error {
	for _, path := range paths {
		if path == "" {
			continue
		}
		fi, err := os.Stat(path)
		if err != nil {
			return err // *PathError names the file
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%s is %s, not a regular file: data and inputs are read from files", path, fileKind(fi.Mode()))
		}
	}
	return nil
}

// fileKind names the kind of a file that is not a regular one.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a folder"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO (named pipe)"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "a special file"
}
