package cpu

import "math/bits"

// Rand is a small deterministic random generator (xoshiro256**, seeded by
// splitmix64), so that a run with the same seed initialises, shuffles and
// drops out identically on every platform and Go version. It is not safe
// for concurrent use.
type Rand struct{ s [4]uint64 }

// NewRand returns a generator seeded from seed; any seed, 0 included, gives
// a full-period state.
func NewRand(seed uint64) *Rand {
	r := &Rand{}
	for i := range r.s {
		seed += 0x9e3779b97f4a7c15
		z := seed
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		r.s[i] = z ^ z>>31
	}
	return r
}

// Uint64 returns the next 64 random bits.
func (r *Rand) Uint64() uint64 {
	s := &r.s
	out := bits.RotateLeft64(s[1]*5, 7) * 9
	t := s[1] << 17
	s[2] ^= s[0]
	s[3] ^= s[1]
	s[1] ^= s[2]
	s[0] ^= s[3]
	s[2] ^= t
	s[3] = bits.RotateLeft64(s[3], 45)
	return out
}

// Float32 returns a uniform value in [0, 1), a multiple of 2⁻²⁴.
func (r *Rand) Float32() float32 {
	return float32(r.Uint64()>>40) * (1.0 / (1 << 24))
}

// Intn returns a uniform value in [0, n), without modulo bias (Lemire's
// multiply-and-reject). n must be positive.
func (r *Rand) Intn(n int) int {
	if n <= 0 {
		panic("cpu: Rand.Intn of a non-positive bound")
	}
	un := uint64(n)
	hi, lo := bits.Mul64(r.Uint64(), un)
	if lo < un {
		thresh := -un % un
		for lo < thresh {
			hi, lo = bits.Mul64(r.Uint64(), un)
		}
	}
	return int(hi)
}

// Shuffle permutes n items uniformly (Fisher–Yates), calling swap to
// exchange items i and j.
func (r *Rand) Shuffle(n int, swap func(i, j int)) {
	for i := n - 1; i > 0; i-- {
		swap(i, r.Intn(i+1))
	}
}

// FillUniform fills p with draws from U(-bound, bound), PyTorch's default
// initialisation of Linear and Conv2d weights with bound = 1/sqrt(fan_in).
func FillUniform(p []float32, bound float32, rng *Rand) {
	for i := range p {
		p[i] = (2*rng.Float32() - 1) * bound
	}
}

// Fill sets every element of p to v.
func Fill(p []float32, v float32) {
	for i := range p {
		p[i] = v
	}
}
