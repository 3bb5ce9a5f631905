package idx

import (
	"encoding/binary"
	"fmt"
)

// Images is an IDX images file: N images of Rows x Cols unsigned bytes, one
// after the other, row-major. Pix is a view into the mapped file (or into a
// decompressed copy); it is valid until Close.
type Images struct {
	Path           string // the file, for messages
	N, Rows, Cols  int
	Pix            []byte // N*Rows*Cols bytes
	release        func() error
	pixelsPerImage int
	closed         bool
}

// Labels is an IDX labels file: one unsigned byte per sample. Values is a
// view like Images.Pix, valid until Close.
type Labels struct {
	Path    string // the file, for messages
	N       int
	Values  []byte
	release func() error
	closed  bool
}

// OpenImages reads and checks the IDX images file at path, raw or gzip.
func OpenImages(path string) (*Images, error) {
	d, err := openFile(path, imagesKind)
	if err != nil {
		return nil, err
	}
	return newImages(path, d), nil
}

// OpenLabels reads and checks the IDX labels file at path, raw or gzip.
func OpenLabels(path string) (*Labels, error) {
	d, err := openFile(path, labelsKind)
	if err != nil {
		return nil, err
	}
	return &Labels{Path: path, N: d.dims[0], Values: d.payload, release: d.release}, nil
}

// ParseImages checks an IDX images file held in memory (raw or gzip); name
// is used in messages. For raw data Pix is a view into data.
func ParseImages(name string, data []byte) (*Images, error) {
	d, err := decodeBytes(name, data, imagesKind)
	if err != nil {
		return nil, err
	}
	return newImages(name, d), nil
}

// ParseLabels checks an IDX labels file held in memory (raw or gzip); name
// is used in messages. For raw data Values is a view into data.
func ParseLabels(name string, data []byte) (*Labels, error) {
	d, err := decodeBytes(name, data, labelsKind)
	if err != nil {
		return nil, err
	}
	return &Labels{Path: name, N: d.dims[0], Values: d.payload}, nil
}

func newImages(name string, d decoded) *Images {
	return &Images{
		Path: name, N: d.dims[0], Rows: d.dims[1], Cols: d.dims[2],
		Pix: d.payload, release: d.release, pixelsPerImage: d.dims[1] * d.dims[2],
	}
}

// Close releases the memory mapping, if any. Pix must not be used after it.
// Closing twice is harmless.
func (im *Images) Close() error {
	if im.closed {
		return nil
	}
	im.closed, im.Pix = true, nil
	if im.release != nil {
		return im.release()
	}
	return nil
}

// Close releases the memory mapping, if any. Values must not be used after
// it. Closing twice is harmless.
func (lb *Labels) Close() error {
	if lb.closed {
		return nil
	}
	lb.closed, lb.Values = true, nil
	if lb.release != nil {
		return lb.release()
	}
	return nil
}

// Image returns the pixels of image i, a view of Rows*Cols bytes.
func (im *Images) Image(i int) []byte {
	p := im.pixelsPerImage
	return im.Pix[i*p : (i+1)*p : (i+1)*p]
}

// byteToUnit maps a pixel byte to [0, 1]: the table makes the conversion a
// load, and the same float32 for the same byte everywhere.
var byteToUnit = func() (t [256]float32) {
	for i := range t {
		t[i] = float32(i) / 255
	}
	return t
}()

// Batch fills dst with the images at indices, in that order, as float32
// pixels scaled from 0..255 to [0, 1]: the model's input layout [batch, rows,
// cols] (a [batch, 1, rows, cols] NCHW tensor has the same layout). dst must
// hold len(indices)*Rows*Cols values; a wrong length or an index out of range
// is a bug in the caller and panics.
func (im *Images) Batch(dst []float32, indices []int) {
	p := im.pixelsPerImage
	if len(dst) != len(indices)*p {
		panic(fmt.Sprintf("idx: Batch of %d images of %dx%d needs %d floats, dst has %d", len(indices), im.Rows, im.Cols, len(indices)*p, len(dst)))
	}
	for b, i := range indices {
		src := im.Pix[i*p : (i+1)*p]
		out := dst[b*p : (b+1)*p]
		for j, v := range src {
			out[j] = byteToUnit[v]
		}
	}
}

// Check reports the first label that is not a valid class index for a model
// with the given number of classes, and how many such labels there are. Call
// it once after opening, before OneHot.
func (lb *Labels) Check(classes int) error {
	bad, first := 0, -1
	for i, v := range lb.Values {
		if int(v) >= classes {
			if first < 0 {
				first = i
			}
			bad++
		}
	}
	if bad == 0 {
		return nil
	}
	return fmt.Errorf("%s: label %d (sample %d) is not a class of this model, which has %d classes (0..%d); %d of %d labels are out of range",
		lb.Path, lb.Values[first], first, classes, classes-1, bad, lb.N)
}

// OneHot fills dst, [len(indices), classes], with the one-hot encoding of the
// labels at indices. dst must hold len(indices)*classes values and the labels
// must have passed Check(classes); anything else is a bug in the caller and
// panics.
func (lb *Labels) OneHot(dst []float32, indices []int, classes int) {
	if len(dst) != len(indices)*classes {
		panic(fmt.Sprintf("idx: OneHot of %d labels with %d classes needs %d floats, dst has %d", len(indices), classes, len(indices)*classes, len(dst)))
	}
	clear(dst)
	for b, i := range indices {
		v := int(lb.Values[i])
		if v >= classes {
			panic(fmt.Sprintf("idx: %s: label %d of sample %d is not below %d classes (Check was not called)", lb.Path, v, i, classes))
		}
		dst[b*classes+v] = 1
	}
}

// Pair checks that an images file and a labels file describe the same
// samples, as far as their counts can tell.
func Pair(im *Images, lb *Labels) error {
	if im.N == lb.N {
		return nil
	}
	return fmt.Errorf("%s holds %d images but %s holds %d labels; images and labels must come from the same set (train with train, t10k with t10k)",
		im.Path, im.N, lb.Path, lb.N)
}

// EncodeImages returns an IDX images file (raw) holding n = len(pix)/(rows*cols)
// images. Tests and tools use it to make small data sets.
func EncodeImages(rows, cols int, pix []byte) []byte {
	n := 0
	if rows*cols > 0 {
		n = len(pix) / (rows * cols)
	}
	out := make([]byte, 16, 16+len(pix))
	binary.BigEndian.PutUint32(out[0:], MagicImages)
	binary.BigEndian.PutUint32(out[4:], uint32(n))
	binary.BigEndian.PutUint32(out[8:], uint32(rows))
	binary.BigEndian.PutUint32(out[12:], uint32(cols))
	return append(out, pix...)
}

// EncodeLabels returns an IDX labels file (raw) holding values.
func EncodeLabels(values []byte) []byte {
	out := make([]byte, 8, 8+len(values))
	binary.BigEndian.PutUint32(out[0:], MagicLabels)
	binary.BigEndian.PutUint32(out[4:], uint32(len(values)))
	return append(out, values...)
}
