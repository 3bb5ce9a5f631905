package safetensors

import (
	"encoding/binary"
	"math"
	"math/rand"
	"testing"
)

// TestF32CopyIsDecode: the F32 converter (a memmove on little-endian
// machines) gives every float's bits as decoding them one by one does,
// NaN payloads, infinities and subnormals included, from source bytes at
// any alignment.
func TestF32CopyIsDecode(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	n := 1027
	buf := make([]byte, 4*n+3)
	r.Read(buf)
	special := []uint32{0x7fc00001, 0xff800000, 0x7f800000, 0x00000001, 0x80000000, 0x3f800000}
	for shift := 0; shift < 4; shift++ {
		src := buf[shift : shift+4*n]
		for i, b := range special {
			binary.LittleEndian.PutUint32(src[4*i:], b)
		}
		got := make([]float32, n)
		converters["F32"](got, src)
		for i := range got {
			want := binary.LittleEndian.Uint32(src[4*i:])
			if math.Float32bits(got[i]) != want {
				t.Fatalf("offset %d, element %d: bits %#x, want %#x", shift, i, math.Float32bits(got[i]), want)
			}
		}
	}
	converters["F32"](nil, nil) // an empty tensor converts to nothing
}
