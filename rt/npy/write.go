package npy

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"github.com/mlbuild/mlbuild/rt/atomicfile"
)

// Encode writes a float32 array of the given shape in C order as a version
// 1.0 .npy file, its header padded so that the data starts at a multiple
// of 64 bytes, as numpy.save does.
func Encode(w io.Writer, shape []int, data []float32) error {
	return encode(w, shape, data, "")
}

// Mark ends the padding of the header of a file that WriteMarked wrote:
// blanks, which every reader of the format skips (NumPy's reads the
// header as a Python literal), in an order NumPy never writes, so that
// a program can tell a file it wrote from one it did not (predict
// replaces its own --output, and no other file, without --force).
const Mark = " \t\t \t"

// WriteMarked is Write with Mark at the end of the header's padding.
func WriteMarked(path string, shape []int, data []float32) error {
	return atomicfile.WriteFile(path, 0o644, func(w io.Writer) error { return encode(w, shape, data, Mark) })
}

// IsMarked reports whether the file at path is a .npy file whose header
// ends with Mark: one that WriteMarked wrote.
func IsMarked(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var prefix [10]byte
	if _, err := io.ReadFull(f, prefix[:]); err != nil || string(prefix[:6]) != Magic || prefix[6] != 1 {
		return false
	}
	header := make([]byte, binary.LittleEndian.Uint16(prefix[8:]))
	if _, err := io.ReadFull(f, header); err != nil {
		return false
	}
	return strings.HasSuffix(string(header), Mark+"\n")
}

func encode(w io.Writer, shape []int, data []float32, mark string) error {
	n := 1
	for _, d := range shape {
		n *= d
	}
	if n != len(data) {
		return fmt.Errorf("npy: shape %s holds %d elements but %d are given", shapeText(shape), n, len(data))
	}
	dict := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': %s, }", shapeText(shape))
	total := len(Magic) + 4 + len(dict) + len(mark) + 1
	pad := (64 - total%64) % 64
	header := dict + strings.Repeat(" ", pad) + mark + "\n"
	if len(header) > math.MaxUint16 {
		return fmt.Errorf("npy: shape %s makes a header too long for format 1.0", shapeText(shape))
	}
	bw := bufio.NewWriter(w)
	bw.WriteString(Magic)
	bw.Write([]byte{1, 0})
	bw.Write(binary.LittleEndian.AppendUint16(nil, uint16(len(header)))) // not binary.Write: its reflection would cost every program
	bw.WriteString(header)
	var b [4]byte
	for _, v := range data {
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
		bw.Write(b[:])
	}
	return bw.Flush()
}

// Write writes a float32 array to path atomically: a crash leaves the old
// file or none, never half of the new one.
func Write(path string, shape []int, data []float32) error {
	return atomicfile.WriteFile(path, 0o644, func(w io.Writer) error { return Encode(w, shape, data) })
}
