package npy

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/mlbuild/mlbuild/rt/atomicfile"
)

// Encode writes a float32 array of the given shape in C order as a version
// 1.0 .npy file, its header padded so that the data starts at a multiple
// of 64 bytes, as numpy.save does.
func Encode(w io.Writer, shape []int, data []float32) error {
	n := 1
	for _, d := range shape {
		n *= d
	}
	if n != len(data) {
		return fmt.Errorf("npy: shape %s holds %d elements but %d are given", shapeText(shape), n, len(data))
	}
	dict := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': %s, }", shapeText(shape))
	total := len(Magic) + 4 + len(dict) + 1
	pad := (64 - total%64) % 64
	header := dict + strings.Repeat(" ", pad) + "\n"
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
