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
	"unicode/utf8"

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
	for _, name := range names {
		if !utf8.ValidString(name) {
			return nil, 0, nil, fmt.Errorf("%s: the class folder %q has a name that is not UTF-8 text; rename it (class names are recorded as text with the weights and printed by predict)", root, name)
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
		for _, f := range files {
			if f.IsDir() || !slices.Contains(imageExts, strings.ToLower(filepath.Ext(f.Name()))) {
				continue
			}
			s.files = append(s.files, filepath.Join(dir, f.Name()))
			s.labels = append(s.labels, c)
		}
	}
	if err := s.checkFiles(&meta.Data); err != nil {
		return nil, 0, nil, err
	}
	count := make([]int, s.classes)
	for _, c := range s.labels {
		count[c]++
	}
	for c, n := range count {
		if n == 0 {
			return nil, 0, nil, fmt.Errorf("%s: the class folder holds no images (%s files); every class needs at least one", filepath.Join(root, names[c]), strings.Join(imageExts, ", "))
		}
	}
	return s, len(s.files), names, nil
}

// maxBadListed bounds the bad files an error lists.
const maxBadListed = 5

// checkFiles reads the header of every image (imageio.ConfigFile: no
// pixels) and checks its size against the model's input unless the spec
// resizes, so that a corrupt or wrong-sized file is named before the
// first step, not when its batch comes up epochs later. With
// d.SkipBadImages the bad files are left out, each named on d.Warn;
// otherwise they are refused, the first few named.
func (s *imageFolderSource) checkFiles(d *DataSpec) error {
	bad := make([]error, len(s.files))
	workers := min(runtime.GOMAXPROCS(0), 8)
	var wg sync.WaitGroup
	for k := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := k; i < len(s.files); i += workers {
				bad[i] = s.checkFile(s.files[i])
			}
		}()
	}
	wg.Wait()
	var errs []error
	files, labels := s.files[:0], s.labels[:0]
	for i, err := range bad {
		if err == nil {
			files, labels = append(files, s.files[i]), append(labels, s.labels[i])
			continue
		}
		errs = append(errs, err)
		if d.SkipBadImages && d.Warn != nil {
			fmt.Fprintf(d.Warn, "warning: skipping %v\n", err)
		}
	}
	s.files, s.labels = files, labels
	if len(errs) == 0 || d.SkipBadImages {
		return nil
	}
	var b strings.Builder
	if len(errs) == 1 {
		b.WriteString(errs[0].Error())
	} else {
		fmt.Fprintf(&b, "%d files of the image folder cannot be used:", len(errs))
		for i, err := range errs {
			if i == maxBadListed {
				fmt.Fprintf(&b, "\n\t… and %d more", len(errs)-i)
				break
			}
			b.WriteString("\n\t" + err.Error())
		}
		b.WriteString("\n")
	}
	if d.Warn != nil { // train, which can leave them out
		b.WriteString(" (pass --skip-bad-images to train on the others, with a warning for each)")
	} else {
		b.WriteString(" (fix or remove them)")
	}
	return fmt.Errorf("%s", b.String())
}

// checkFile checks one image's file and header.
func (s *imageFolderSource) checkFile(path string) error {
	if err := regularFiles(path); err != nil {
		return err
	}
	h, w, err := imageio.ConfigFile(path)
	if err != nil {
		return err
	}
	if !s.resize && (h != s.h || w != s.w) {
		return fmt.Errorf("%s: the image is %dx%d pixels (height x width) but the model takes %dx%d (set resize: true in the spec's dataset to resample every image)", path, h, w, s.h, s.w)
	}
	return nil
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
