// Package idx reads the IDX files that MNIST and its relatives ship in: an
// images file (magic 0x00000803, unsigned bytes, [n, rows, cols]) and a labels
// file (magic 0x00000801, unsigned bytes, [n]), raw or gzip-compressed. Raw
// files are memory-mapped where the OS allows, so a 47 MB training set costs
// no copy and no start-up time; gzip files are decompressed into memory.
//
// Every error names the file and says what is wrong in terms a user can act
// on: a labels file given where images were expected, a file cut short (with
// both byte counts), dimensions too large to be real, labels that do not fit
// the model's classes, or images and labels that do not pair up.
//
// This package is copied into each generated program's module (it is embedded
// in the mlbuild binary), so it imports only the standard library.
package idx

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// Magic numbers of the two IDX files the trainer reads. The third byte is the
// element type, the fourth the number of dimensions.
const (
	MagicImages = 0x00000803 // unsigned bytes, 3 dimensions: [n, rows, cols]
	MagicLabels = 0x00000801 // unsigned bytes, 1 dimension: [n]
)

// MaxElements bounds the number of elements a header may declare (the
// product of its dimensions). It keeps a corrupt or hostile header from
// asking for an absurd allocation and fits an int on 32-bit targets.
const MaxElements = 1<<31 - 1

// typeUnsignedByte is the IDX element type code of unsigned bytes, the only
// one the trainer reads.
const typeUnsignedByte = 0x08

// elementTypes names the IDX element type codes, for error messages.
var elementTypes = map[byte]string{
	0x08: "unsigned byte",
	0x09: "signed byte",
	0x0B: "int16",
	0x0C: "int32",
	0x0D: "float32",
	0x0E: "float64",
}

// kind is what a caller expects a file to hold.
type kind struct {
	noun  string // "images" or "labels"
	magic uint32
	ndim  int
}

var (
	imagesKind = kind{"images", MagicImages, 3}
	labelsKind = kind{"labels", MagicLabels, 1}
)

// describeMagic says in words what a 4-byte IDX magic number announces.
func describeMagic(m [4]byte) string {
	typ, ok := elementTypes[m[2]]
	if !ok {
		typ = fmt.Sprintf("unknown element type 0x%02x", m[2])
	}
	s := fmt.Sprintf("magic 0x%08x (%s, %d dimension", binary.BigEndian.Uint32(m[:]), typ, m[3])
	if m[3] != 1 {
		s += "s"
	}
	s += ")"
	switch {
	case m[2] == typeUnsignedByte && m[3] == 1:
		s += ": this looks like a labels file"
	case m[2] == typeUnsignedByte && m[3] == 3:
		s += ": this looks like an images file"
	}
	return s
}

// notIDX explains a file whose first bytes cannot start an IDX file, naming
// the format when it is a common one.
func notIDX(b []byte) string {
	sig := func(prefix string) bool { return strings.HasPrefix(string(b), prefix) }
	var guess string
	switch {
	case sig("\x89PNG"):
		guess = " (it is a PNG image)"
	case sig("P2"), sig("P5"):
		guess = " (it is a PGM image)"
	case sig("\xff\xd8\xff"):
		guess = " (it is a JPEG image)"
	case sig("PK\x03\x04"):
		guess = " (it is a zip archive; unpack it first)"
	case sig("<"):
		guess = " (it looks like HTML or XML; was the download redirected?)"
	}
	n := min(len(b), 4)
	return fmt.Sprintf("not an IDX file: it starts with bytes % x%s; IDX files start with 00 00 08 and a dimension count", b[:n], guess)
}

// checkMagic verifies that the first four bytes announce the wanted kind.
func checkMagic(name string, m [4]byte, want kind) error {
	if m[0] != 0 || m[1] != 0 {
		return fmt.Errorf("%s: %s", name, notIDX(m[:]))
	}
	if binary.BigEndian.Uint32(m[:]) == want.magic {
		return nil
	}
	if int(m[3]) == want.ndim {
		typ, ok := elementTypes[m[2]]
		if !ok {
			typ = fmt.Sprintf("an unknown element type (0x%02x)", m[2])
		}
		return fmt.Errorf("%s: %s file holds %s elements; only unsigned bytes (type 0x08, magic 0x%08x) are supported",
			name, want.noun, typ, want.magic)
	}
	return fmt.Errorf("%s: %s; expected %s file (magic 0x%08x, %d dimension%s)",
		name, describeMagic(m), want.article(), want.magic, want.ndim, plural(want.ndim))
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// article is the kind's noun with its indefinite article.
func (k kind) article() string {
	if k.noun == "images" {
		return "an images"
	}
	return "a " + k.noun
}

// headerLen is the size of the header of a file of the given kind: the
// magic and one big-endian uint32 per dimension.
func (k kind) headerLen() int { return 4 + 4*k.ndim }

// parseDims reads the dimensions that follow the magic and checks that they
// describe a plausible amount of data. It returns the dimensions and the
// number of payload bytes they need.
func parseDims(name string, b []byte, want kind) (dims []int, payload int, err error) {
	dims = make([]int, want.ndim)
	total := int64(1)
	for i := range dims {
		d := int64(binary.BigEndian.Uint32(b[4+4*i:]))
		dims[i] = int(min(d, MaxElements)) // kept in range of int on 32-bit targets
		if d > MaxElements || total*d > MaxElements {
			return nil, 0, fmt.Errorf("%s: the header declares %s, more than the %d elements this reader accepts; the file is corrupt",
				name, describeDims(b, want), MaxElements)
		}
		total *= d
	}
	if want.ndim == 3 && (dims[1] == 0 || dims[2] == 0) {
		return nil, 0, fmt.Errorf("%s: the header declares images of %dx%d pixels; an image needs at least one pixel", name, dims[1], dims[2])
	}
	return dims, int(total), nil
}

// describeDims renders the raw dimensions of a header for messages, read
// without the range checks so that absurd values show as they are.
func describeDims(b []byte, want kind) string {
	d := func(i int) uint32 { return binary.BigEndian.Uint32(b[4+4*i:]) }
	if want.ndim == 3 {
		return fmt.Sprintf("%d images of %dx%d pixels", d(0), d(1), d(2))
	}
	return fmt.Sprintf("%d labels", d(0))
}

// sizeError explains a file whose length disagrees with its header.
func sizeError(name string, header []byte, want kind, need, have int64, decompressed bool) error {
	what := "the file"
	if decompressed {
		what = "the decompressed file"
	}
	if have < need {
		return fmt.Errorf("%s: truncated: the header declares %s, which needs %d bytes, but %s has %d; was the download cut short?",
			name, describeDims(header, want), need, what, have)
	}
	return fmt.Errorf("%s: the header declares %s, which needs %d bytes, but %s has more (%d or more): trailing data after the last %s",
		name, describeDims(header, want), need, what, have, strings.TrimSuffix(want.noun, "s"))
}
