package app

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/mlbuild/mlbuild/rt/atomicfile"
	"github.com/mlbuild/mlbuild/rt/imageio"
)

// sampleCmd writes one image of the data set to a PNG (or PGM) file and
// prints its label, so that a user has an input for predict with nothing
// but the program and its data: `sample --data DIR --index 7 digit.png`.
func sampleCmd(m Model, args []string, stdout io.Writer) error {
	meta := m.Meta()
	if !showsSample(meta) {
		return sampleRefusal(meta)
	}
	d := meta.Defaults
	flags := newFlags(meta, "sample")
	data := flags.String("data", "", "the `DIR` holding the IDX files ("+d.TestImages+", ...)")
	index := flags.Int("index", 0, "write image `N` of the file, counted from 0")
	train := flags.Bool("train", false, "take the image from the training files, not the test files")
	force := flags.Bool("force", false, "replace OUT when it exists")
	operands, err := parseFlags(flags, args, stdout)
	if err != nil {
		return err
	}
	if *data == "" || len(operands) != 1 {
		return usageError{fmt.Sprintf("sample needs --data DIR and one OUT file (e.g. digit.png)\nRun '%s --help' for usage.", flags.Name())}
	}
	if err := noDataset(meta, "sample"); err != nil {
		return err
	}
	out := operands[0]
	images, labels, which := d.TestImages, d.TestLabels, "test"
	if *train {
		images, labels, which = d.TrainImages, d.TrainLabels, "training"
	}
	im, lb, err := meta.idxPair(filepath.Join(*data, images), filepath.Join(*data, labels))
	if err != nil {
		return err
	}
	defer im.Close()
	defer lb.Close()
	if *index < 0 || *index >= im.N {
		return usageError{fmt.Sprintf("--index %d is not an image of %s, which holds %d (0 to %d)", *index, images, im.N, im.N-1)}
	}
	pix := im.Image(*index)
	write := func(w io.Writer) error {
		if strings.EqualFold(filepath.Ext(out), ".pgm") {
			_, err := fmt.Fprintf(w, "P5\n%d %d\n255\n%s", im.Cols, im.Rows, pix)
			return err
		}
		_, err := w.Write(imageio.EncodeGrayPNG(pix, im.Cols, im.Rows))
		return err
	}
	if *force {
		err = atomicfile.WriteFile(out, 0o644, write)
	} else {
		err = atomicfile.WriteNewFile(out, 0o644, write)
	}
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists; choose another name or pass --force to replace it", out)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %s image %d of %s (%d×%d), label %d\n", out, which, *index, images, im.Rows, im.Cols, lb.Values[*index])
	return nil
}
