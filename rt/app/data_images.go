package app

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mlbuild/mlbuild/rt/imageio"
)

// imageFolderSource is a folder of class folders of images (torchvision's
// ImageFolder layout): the images are decoded when a batch is filled, on
// the batch loader's goroutine, so that a folder larger than memory trains
// with the memory of a batch.
type imageFolderSource struct {
	files   []string // every image, class by class, each class's in name order
	labels  []int    // each image's class
	classes int
	h, w    int // the model's image size
	resize  bool
}

// imageExts are the file types imageio decodes; other files in a class
// folder are not images of the set and are left alone.
var imageExts = []string{".png", ".pgm"}

// openImageFolder lists root's class folders (in sorted order) and their
// images. It checks what can be checked without decoding: the number of
// classes, their names against want (the spec's classNames or the ones
// training recorded, when known), and that no class is empty.
func openImageFolder(meta *Meta, root string, want []string) (source, int, []string, error) {
	if c := inputChannels(meta); c != 1 {
		return nil, 0, nil, fmt.Errorf("image folders are read as grey images, but the model input %s has %d channels", joinShape(meta.InputShape), c)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, 0, nil, err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	if len(names) != meta.Classes {
		return nil, 0, nil, fmt.Errorf("%s has %d class folders (%s) but the model has %d classes", root, len(names), summariseNames(names), meta.Classes)
	}
	if len(want) > 0 && !slices.Equal(want, names) {
		return nil, 0, nil, fmt.Errorf("%s: the class folders are %s but the classes are %s (the spec's classNames, or the training folders recorded in the weights)", root, summariseNames(names), summariseNames(want))
	}
	h, w := inputHW(meta)
	s := &imageFolderSource{classes: meta.Classes, h: h, w: w, resize: meta.Data.Resize}
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
			return nil, 0, nil, fmt.Errorf("%s: the class folder holds no images (%s files)", dir, strings.Join(imageExts, ", "))
		}
	}
	return s, len(s.files), names, nil
}

// inputChannels is the channel count of an image input: the first of
// three axes, or 1.
func inputChannels(meta *Meta) int {
	if len(meta.InputShape) == 3 {
		return meta.InputShape[0]
	}
	return 1
}

func (s *imageFolderSource) fill(x, y []float32, idx []int) error {
	n := s.h * s.w
	clear(y[:len(idx)*s.classes])
	for k, i := range idx {
		pix, ih, iw, err := imageio.Load(s.files[i])
		if err != nil {
			return err
		}
		pix, err = imageio.Fit(pix, ih, iw, s.h, s.w, s.resize)
		if err != nil {
			return fmt.Errorf("%s: %v (set resize: true in the dataset to resample)", s.files[i], err)
		}
		copy(x[k*n:(k+1)*n], pix)
		y[k*s.classes+s.labels[i]] = 1
	}
	return nil
}

func (s *imageFolderSource) close() {}
