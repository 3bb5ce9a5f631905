package app

import (
	"fmt"
	"path/filepath"

	"github.com/mlbuild/mlbuild/rt/cpu"
	"github.com/mlbuild/mlbuild/rt/idx"
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
		standardize(x[:len(idx)*d.features], d.features, d.rec.mean, d.rec.std)
		standardize(y[:len(idx)*d.width], d.width, d.rec.tmean, d.rec.tstd)
	}
	return nil
}

// idxSource is a pair of IDX files.
type idxSource struct {
	images  *idx.Images
	labels  *idx.Labels
	classes int
}

func (s *idxSource) fill(x, y []float32, indices []int) error {
	s.images.Batch(x, indices)
	s.labels.OneHot(y, indices, s.classes)
	return nil
}

func (s *idxSource) close() {
	s.images.Close()
	s.labels.Close()
}

// openPair opens an images and a labels file and checks them against each
// other and against the model's input shape and class count.
func openPair(meta *Meta, imagesPath, labelsPath string) (*dataset, error) {
	im, err := idx.OpenImages(imagesPath)
	if err != nil {
		return nil, err
	}
	lb, err := idx.OpenLabels(labelsPath)
	if err != nil {
		im.Close()
		return nil, err
	}
	ds := &dataset{src: &idxSource{im, lb, meta.Classes}, n: im.N, features: im.Rows * im.Cols, width: meta.Classes, images: im, labels: lb}
	fail := func(err error) (*dataset, error) {
		ds.close()
		return nil, err
	}
	if err := idx.Pair(im, lb); err != nil {
		return fail(err)
	}
	if err := lb.Check(meta.Classes); err != nil {
		return fail(err)
	}
	want := meta.inputSize()
	if im.Rows*im.Cols != want {
		return fail(fmt.Errorf("%s: images are %d×%d (%d values) but the model's input is %s (%d values)",
			imagesPath, im.Rows, im.Cols, im.Rows*im.Cols, joinShape(meta.InputShape), want))
	}
	return ds, nil
}

// openTrainSet opens the training samples named by the spec in dir (the
// first limit of them when limit > 0) and fits the preprocessing the spec
// asks for on them, recording it in meta for the weights files.
func openTrainSet(meta *Meta, dir string, limit int) (*dataset, error) {
	if meta.format() == "idx" {
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

// openTestSet opens the test samples named by the spec in dir, with the
// preprocessing that training recorded in rec.
func openTestSet(meta *Meta, dir string, rec *record) (*dataset, error) {
	if meta.format() == "idx" {
		d := meta.Defaults
		return openPair(meta, filepath.Join(dir, d.TestImages), filepath.Join(dir, d.TestLabels))
	}
	ds, _, err := openSplit(meta, dir, false, rec)
	if err != nil {
		return nil, err
	}
	ds.rec = rec
	return ds, nil
}

// split holds out a seeded random fraction of the images for validation.
func (d *dataset) split(frac float64, seed int64) (train, val []int) {
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

// batchLoader fills the next batch on another goroutine while the current
// one computes, then copies it into the plan's input buffers.
type batchLoader struct {
	ds      *dataset
	batch   int
	classes int
	x, y    []float32
	idx     []int
	done    chan struct{}
	err     error // of the last fill, read after done
}

func newBatchLoader(ds *dataset, batch, classes int) *batchLoader {
	return &batchLoader{ds: ds, batch: batch, classes: classes,
		x: make([]float32, batch*ds.features), y: make([]float32, batch*classes),
		idx: make([]int, batch)}
}

// prefetch starts filling batch number b of order.
func (l *batchLoader) prefetch(order []int, b int) {
	copy(l.idx, order[b*l.batch:(b+1)*l.batch])
	done := make(chan struct{})
	l.done = done
	go func() {
		l.err = l.ds.fill(l.x, l.y, l.idx)
		close(done)
	}()
}

// wait blocks until the prefetched batch is ready and copies it into x, y,
// or returns why it could not be read.
func (l *batchLoader) wait(x, y []float32) error {
	<-l.done
	l.done = nil
	if l.err != nil {
		return l.err
	}
	copy(x, l.x)
	copy(y, l.y)
	return nil
}

// drain waits for a prefetch still under way, so that the files it reads
// are not closed (unmapped) beneath it when training stops early.
func (l *batchLoader) drain() {
	if l.done != nil {
		<-l.done
		l.done = nil
	}
}
