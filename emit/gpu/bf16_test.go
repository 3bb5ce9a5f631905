package gpu

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// bf16Want is x rounded to bfloat16 as the IR's StoreBF16 promises, by the
// test's own arithmetic: to nearest, ties to even, a NaN kept and quieted.
func bf16Want(x float32) uint16 {
	u := math.Float32bits(x)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x40
	}
	hi, rest := u>>16, u&0xffff
	if rest > 0x8000 || rest == 0x8000 && hi&1 == 1 {
		hi++
	}
	return uint16(hi)
}

// bf16Halves is v's bytes as bfloat16 elements, two in each float32.
func bf16Halves(v []float32) []uint16 {
	h := make([]uint16, 2*len(v))
	for i, x := range v {
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(x))
		h[2*i], h[2*i+1] = binary.LittleEndian.Uint16(b[:]), binary.LittleEndian.Uint16(b[2:])
	}
	return h
}

// bf16RoundTripKernel stores x[i] into the bfloat16 buffer y, then reads it
// back into z: StoreBF16 and LoadBF16 of one element a thread.
func bf16RoundTripKernel(n int) *Kernel {
	i := vr("i")
	return &Kernel{Name: "bf16_round_trip", Doc: "y = bf16(x); z = float(y)", Threadgroup: 64, Groups: (n + 63) / 64,
		Params: []Param{{Name: "x", Elem: Float, Size: n}, {Name: "y", Elem: BF16, Mutable: true, Size: n}, {Name: "z", Elem: Float, Mutable: true, Size: n}},
		Body: []Stmt{
			let("i", Int, gidE),
			If{Cond: lt(i, i32(n)), Then: []Stmt{
				StoreBF16{Buf: "y", Index: i, Value: load("x", i)},
				store("z", i, LoadBF16{Buf: "y", Index: i}),
			}},
		}}
}

// TestBF16StoreLoad runs StoreBF16 and LoadBF16 in both dialects on the
// CPU: the stored bits are the rounding of each value (ties both ways,
// values that round up a binade or to infinity, infinities, NaNs of both
// signs, zeros, subnormals, random values), and the load gives back the
// float they stand for, bit for bit; the printed kernels match the
// goldens.
func TestBF16StoreLoad(t *testing.T) {
	x := []float32{1, -1, 0, float32(math.Copysign(0, -1)),
		1 + 0x1p-8, 1 + 3*0x1p-8, 1 + 0x1p-8 + 0x1p-20, -(1 + 3*0x1p-8), // ties to even, above a tie
		1.9999999, math.MaxFloat32, -math.MaxFloat32, // round up a binade, past the largest bfloat16
		float32(math.Inf(1)), float32(math.Inf(-1)),
		math.Float32frombits(0x7f800001), math.Float32frombits(0xffc12345), // NaNs (signalling, quiet, negative)
		math.Float32frombits(0x00000001), math.Float32frombits(0x00018000), math.Float32frombits(0x807fffff), // subnormals
	}
	r := rand.New(rand.NewPCG(3, 4))
	for len(x) < 131 {
		x = append(x, (r.Float32()*2-1)*float32(math.Pow(2, float64(r.IntN(60)-30))))
	}
	n := len(x)
	k := bf16RoundTripKernel(n)
	for _, d := range []*Dialect{CUDA, Metal} {
		res := runCases(t, d, []gpuCase{{name: "bf16", k: k, in: [][]float32{x, zeros((n + 1) / 2), zeros(n)}}})
		y, z := bf16Halves(res[0][1]), res[0][2]
		bad := 0
		for i, v := range x {
			want := bf16Want(v)
			if y[i] != want || math.Float32bits(z[i]) != uint32(want)<<16 {
				if bad < 5 {
					t.Errorf("%s: x[%d] = %g (%#08x): stored %#04x, loaded %#08x; want %#04x and %#08x",
						d.Name, i, v, math.Float32bits(v), y[i], math.Float32bits(z[i]), want, uint32(want)<<16)
				}
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d values rounded or loaded wrong", d.Name, bad, n)
		}
		src, err := Source(d, []*Kernel{Rewrite(k, d)})
		if err != nil {
			t.Fatal(err)
		}
		golden(t, "bf16_round_trip."+map[string]string{"cuda": "cu", "metal": "metal"}[d.Name], src)
	}
}
