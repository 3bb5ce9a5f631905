package gpuhost

import "testing"

// TestWriteTwinsKRSC: writeTwins writes a filter's KRSC twin
// (BF16Twin.KRSC) with KCRS element (o, c, t) of the weight at
// (o·taps + t)·channels + c, and a twin without KRSC in the weight's
// order, each element rounded to bfloat16.
func TestWriteTwinsKRSC(t *testing.T) {
	const oc, cg, rs = 3, 4, 5 // a filter [3, 4, 5] and a bias [6]
	const n, bias = oc * cg * rs, 6
	state := make([]float32, n+bias+(n+1)/2+(bias+1)/2)
	for i := range n + bias {
		state[i] = float32(i)/4 - 8 // distinct, and exact in bfloat16
	}
	m := &Model{p: &Program{BF16Twins: []BF16Twin{
		{Of: Region{Arena: ArenaState, Offset: 0, Size: n}, Offset: n + bias, KRSC: [3]int{oc, cg, rs}},
		{Of: Region{Arena: ArenaState, Offset: n, Size: bias}, Offset: n + bias + (n+1)/2},
	}}}
	m.host[ArenaState] = state
	m.writeTwins()
	filter := WidenBF16(state[n+bias:], n)
	for o := range oc {
		for c := range cg {
			for tap := range rs {
				if got, want := filter[(o*rs+tap)*cg+c], state[(o*cg+c)*rs+tap]; got != want {
					t.Fatalf("the KRSC twin of filter element (%d, %d, %d) is %v, want %v", o, c, tap, got, want)
				}
			}
		}
	}
	for i, v := range WidenBF16(state[n+bias+(n+1)/2:], bias) {
		if v != state[n+i] {
			t.Fatalf("the bias's twin [%d] is %v, want %v", i, v, state[n+i])
		}
	}
}
