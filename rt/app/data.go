package app

import (
	"fmt"
	"path/filepath"

	"github.com/mlbuild/mlbuild/rt/cpu"
	"github.com/mlbuild/mlbuild/rt/idx"
)

// dataset is a pair of IDX files checked against the model.
type dataset struct {
	images *idx.Images
	labels *idx.Labels
	n      int
}

func (d *dataset) close() {
	d.images.Close()
	d.labels.Close()
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
	ds := &dataset{images: im, labels: lb, n: im.N}
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
	want := 1
	for _, d := range meta.InputShape {
		want *= d
	}
	if im.Rows*im.Cols != want {
		return fail(fmt.Errorf("%s: images are %d×%d (%d values) but the model's input is %s (%d values)",
			imagesPath, im.Rows, im.Cols, im.Rows*im.Cols, joinShape(meta.InputShape), want))
	}
	return ds, nil
}

// openTrainSet opens the training files named by the spec in dir.
func openTrainSet(meta *Meta, dir string, limit int) (*dataset, error) {
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
}

func newBatchLoader(ds *dataset, batch, classes int) *batchLoader {
	return &batchLoader{ds: ds, batch: batch, classes: classes,
		x: make([]float32, batch*ds.images.Rows*ds.images.Cols), y: make([]float32, batch*classes),
		idx: make([]int, batch)}
}

// prefetch starts filling batch number b of order.
func (l *batchLoader) prefetch(order []int, b int) {
	copy(l.idx, order[b*l.batch:(b+1)*l.batch])
	done := make(chan struct{})
	l.done = done
	go func() {
		l.ds.images.Batch(l.x, l.idx)
		l.ds.labels.OneHot(l.y, l.idx, l.classes)
		close(done)
	}()
}

// wait blocks until the prefetched batch is ready and copies it into x, y.
func (l *batchLoader) wait(x, y []float32) {
	<-l.done
	l.done = nil
	copy(x, l.x)
	copy(y, l.y)
}

// drain waits for a prefetch still under way, so that the files it reads
// are not closed (unmapped) beneath it when training stops early.
func (l *batchLoader) drain() {
	if l.done != nil {
		<-l.done
		l.done = nil
	}
}
