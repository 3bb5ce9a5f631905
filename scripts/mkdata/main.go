// Command mkdata writes the example data sets of models/ that are derived
// from files Debian packages ship, in the layout each example reads. It is
// run by scripts/fetch-image-data.sh (make data), never by a produced
// program.
//
//	mkdata faces LFW_SUBSET.NPY DIR
//	    DIR/face/*.jpg and DIR/nonface/*.jpg: scikit-image's lfw_subset.npy
//	    (200 grey 25x25 photographs from Labeled Faces in the Wild, the first
//	    100 faces, the other 100 not), one JPEG (quality 95) per image: an
//	    image folder as a camera or a web scrape leaves one.
//	mkdata digits-npz DIGITS.CSV OUT.npz
//	    scikit-learn's 1797 handwritten digits (8x8 grey levels 0 to 16, and
//	    the digit) as a compressed NumPy archive holding x (uint8, shape
//	    (1797, 8, 8)) and y (int64, shape (1797,)), as numpy.savez_compressed
//	    writes one.
package main

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"encoding/csv"
	"fmt"
	"image"
	"image/jpeg"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mlbuild/mlbuild/rt/npy"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: mkdata faces LFW_SUBSET.NPY DIR | mkdata digits-npz DIGITS.CSV OUT.npz")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "faces":
		err = faces(os.Args[2], os.Args[3])
	case "digits-npz":
		err = digitsNPZ(os.Args[2], os.Args[3])
	default:
		err = fmt.Errorf("unknown data set %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkdata:", err)
		os.Exit(1)
	}
}

// faces writes the 200 images of lfw_subset.npy as JPEG files in class
// folders, into a temporary folder renamed to dir when complete.
func faces(src, dir string) error {
	a, err := npy.Open(src)
	if err != nil {
		return err
	}
	defer a.Close()
	if len(a.Shape) != 3 || a.Shape[0] != 200 {
		return fmt.Errorf("%s: shape %s, want (200, height, width)", src, a.ShapeText())
	}
	h, w := a.Shape[1], a.Shape[2]
	tmp := dir + ".tmp"
	os.RemoveAll(tmp)
	for i := range 200 {
		class := "face"
		if i >= 100 {
			class = "nonface"
		}
		img := image.NewGray(image.Rect(0, 0, w, h))
		for j := range img.Pix {
			img.Pix[j] = uint8(math.Round(min(max(a.At(i*h*w+j), 0), 1) * 255))
		}
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 95}); err != nil {
			return err
		}
		path := filepath.Join(tmp, class, fmt.Sprintf("lfw%03d.jpg", i))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			return err
		}
	}
	os.RemoveAll(dir)
	return os.Rename(tmp, dir)
}

// digitsNPZ writes digits.csv (64 grey levels and the digit per row) as an
// npz archive of a uint8 images array and an int64 labels array.
func digitsNPZ(src, out string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return fmt.Errorf("%s: %v", src, err)
	}
	x := make([]byte, 0, len(rows)*64)
	y := make([]byte, 0, len(rows)*8)
	for r, row := range rows {
		if len(row) != 65 {
			return fmt.Errorf("%s:%d: %d columns, want 65", src, r+1, len(row))
		}
		for c, cell := range row {
			v, err := strconv.ParseFloat(strings.TrimSpace(cell), 64)
			if err != nil || v < 0 || v > 16 || v != math.Trunc(v) {
				return fmt.Errorf("%s:%d: column %d is %q, want an integer 0 to 16", src, r+1, c+1, cell)
			}
			if c < 64 {
				x = append(x, byte(v))
			} else {
				y = binary.LittleEndian.AppendUint64(y, uint64(v))
			}
		}
	}
	n := len(rows)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, a := range []struct {
		name, descr string
		shape       string
		data        []byte
	}{{"x.npy", "|u1", fmt.Sprintf("(%d, 8, 8)", n), x}, {"y.npy", "<i8", fmt.Sprintf("(%d,)", n), y}} {
		w, err := zw.Create(a.name) // deflated, as numpy.savez_compressed
		if err != nil {
			return err
		}
		w.Write(npyHeader(a.descr, a.shape))
		w.Write(a.data)
	}
	if err := zw.Close(); err != nil {
		return err
	}
	tmp := out + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

// npyHeader is a version 1.0 .npy header for a C-order array, padded to a
// multiple of 64 bytes as numpy.save pads it.
func npyHeader(descr, shape string) []byte {
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape)
	total := len(npy.Magic) + 4 + len(dict) + 1
	header := dict + strings.Repeat(" ", (64-total%64)%64) + "\n"
	out := append([]byte(npy.Magic), 1, 0)
	out = binary.LittleEndian.AppendUint16(out, uint16(len(header)))
	return append(out, header...)
}
