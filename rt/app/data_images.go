package app

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mlbuild/mlbuild/rt/imageio"
)

// imageFolderSource is a folder of class folders of images (torchvision's
// ImageFolder layout): the images are decoded when a batch is filled, on
// the batch loader's goroutine and in parallel across the batch, so that a
// folder larger than memory trains with the memory of a few batches.
type imageFolderSource struct {
	files    []string // every image, class by class, each class's in name order
	labels   []int    // each image's class
	classes  int
	channels int // 1: grey, 3: RGB, as the model input says
	h, w     int // the model's image size
	resize   bool
	read     atomic.Int64 // bytes of image files read, for the data rate
}

// imageExts are the file types imageio decodes; other files in a class
// folder are not images of the set and are left alone.
var imageExts = []string{".png", ".jpg", ".jpeg", ".pgm", ".ppm"}

// openImageFolder lists root's class folders and their images: class i is
// the folder named want[i] (the spec's classNames or the ones training
// recorded, when known), else the i-th folder in sorted order. It checks
// what can be checked without decoding: the number of classes, their
// names against want, and that no class is empty.
func openImageFolder(meta *Meta, root string, want []string) (source, int, []string, error) {
	c := meta.channels()
	if len(meta.InputShape) < 2 || len(meta.InputShape) > 3 || (c != 1 && c != 3) {
		return nil, 0, nil, fmt.Errorf("image folders are read as grey ([1, height, width] or [height, width]) or RGB ([3, height, width]) images, but the model input is %s", joinShape(meta.InputShape))
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, 0, nil, err
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		dir := e.IsDir()
		if e.Type()&os.ModeSymlink != 0 { // a linked class folder counts, as in torchvision
			fi, err := os.Stat(filepath.Join(root, e.Name()))
			dir = err == nil && fi.IsDir()
		}
		if dir {
			names = append(names, e.Name())
		}
	}
	sort.Sort(sort.StringSlice(names))
	if len(names) != meta.Classes {
		return nil, 0, nil, fmt.Errorf("%s has %d class folders (%s) but the model has %d classes", root, len(names), summariseNames(names), meta.Classes)
	}
	if len(want) > 0 && !slices.Equal(want, names) {
		if err := sameClasses(root, names, want); err != nil {
			return nil, 0, nil, err
		}
		names = slices.Clone(want) // the class indices follow want's order
	}
	h, w := inputHW(meta)
	s := &imageFolderSource{classes: meta.Classes, channels: c, h: h, w: w, resize: meta.Data.Resize}
	for c, name := range names {
		dir := filepath.Join(root, name)
		files, err := os.ReadDir(dir)
		if err != nil {
			return nil, 0, nil, err
		}
		count := 0
		for _, f := range files {
			if f.IsDir() || !slices.Contains(imageExts, strings.ToLower(filepath.Ext(f.Name()))) {
				continue
			}
			s.files = append(s.files, filepath.Join(dir, f.Name()))
			s.labels = append(s.labels, c)
			count++
		}
		if count == 0 {
			return nil, 0, nil, fmt.Errorf("%s: the class folder holds no images (%s files); every class needs at least one", dir, strings.Join(imageExts, ", "))
		}
	}
	return s, len(s.files), names, nil
}

// fill decodes the images idx into x, a few goroutines each taking every
// k-th image; the error reported is that of the first failing image in
// batch order, so that it does not depend on scheduling.
func (s *imageFolderSource) fill(x, y []float32, idx []int) error {
	n := s.channels * s.h * s.w
	clear(y[:len(idx)*s.classes])
	workers := min(runtime.GOMAXPROCS(0), len(idx), 8)
	errs := make([]error, len(idx))
	var wg sync.WaitGroup
	for k := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := k; j < len(idx); j += workers {
				errs[j] = s.decode(x[j*n:(j+1)*n], s.files[idx[j]])
			}
		}()
	}
	wg.Wait()
	for j, i := range idx {
		if errs[j] != nil {
			return errs[j]
		}
		y[j*s.classes+s.labels[i]] = 1
	}
	return nil
}

// decode reads one image into dst, as the model's channels and size.
func (s *imageFolderSource) decode(dst []float32, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s.read.Add(int64(len(data)))
	pix, ih, iw, err := imageio.DecodeChannels(path, data, s.channels)
	if err != nil {
		return err
	}
	pix, err = imageio.FitChannels(pix, s.channels, ih, iw, s.h, s.w, s.resize)
	if err != nil {
		return fmt.Errorf("%s: %v (or set resize: true in the spec's dataset to resample every image to %dx%d)", path, strings.TrimSuffix(err.Error(), ", or pass --resize to resample it"), s.h, s.w)
	}
	copy(dst, pix)
	return nil
}

func (s *imageFolderSource) bytesRead() int64 { return s.read.Load() }

func (s *imageFolderSource) close() {}
