package cpu

import "testing"

// BenchmarkGemvDecode runs the dense steps of one token of models/gpt.cue's
// KV-cache decode (6 layers of 384→384 ×4, 384→1536, 1536→384, then
// 384→89): every weight read once, 42.5 MB, as generate does a token;
// "rows" with the four-row kernel where it runs, "dot" without; "bf16"
// the same products on bfloat16 weights (GemvBF16: 21.3 MB a token).
func BenchmarkGemvDecode(b *testing.B) {
	type mv struct{ in, out int }
	var shapes []mv
	for l := 0; l < 6; l++ {
		shapes = append(shapes, mv{384, 384}, mv{384, 384}, mv{384, 384}, mv{384, 384}, mv{384, 1536}, mv{1536, 384})
	}
	shapes = append(shapes, mv{384, 89})
	r := newTestRand(1)
	ws := make([][]float32, len(shapes))
	bytes := 0
	for i, s := range shapes {
		ws[i] = randSlice(r, s.in*s.out, 1)
		bytes += 4 * s.in * s.out
	}
	x := randSlice(r, 1536, 1)
	y := make([]float32, 1536)
	run := func(b *testing.B) {
		b.SetBytes(int64(bytes))
		for n := 0; n < b.N; n++ {
			for i, s := range shapes {
				GemmFwd(x[:s.in], ws[i], nil, y[:s.out], 1, s.in, s.out, ActNone, 0)
			}
		}
	}
	b.Run("rows", run)
	wb := make([][]uint16, len(ws))
	for i, w := range ws {
		wb[i] = make([]uint16, len(w))
		ToBF16(wb[i], w)
	}
	xb := make([]uint16, len(x))
	b.Run("bf16", func(b *testing.B) {
		b.SetBytes(int64(bytes / 2))
		for n := 0; n < b.N; n++ {
			for i, s := range shapes {
				GemvBF16(x, xb, wb[i], nil, y, s.in, s.out, ActNone, 0)
			}
		}
	})
	if dot4Supported {
		dot4Supported = false
		b.Run("dot", run)
		dot4Supported = true
	}
}
