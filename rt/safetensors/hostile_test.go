package safetensors

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// manyKeys is a header of n zero-sized tensors and n metadata keys.
func manyKeys(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"__metadata__":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":"v"`, i)
	}
	b.WriteString(`}`)
	for i := range n {
		fmt.Fprintf(&b, `,"t%d":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}`, i)
	}
	b.WriteString(`}`)
	return handMade(b.String(), nil)
}

// TestManyKeysParseInLinearTime reads headers of 5 000 and 40 000
// tensors (as many metadata keys). The duplicate-key check compared each
// key with every earlier one, which took 23 s for 80 000 and would take 6 s for the larger; linear
// parsing takes 8 times as long for 8 times the keys, quadratic 64 times.
// The test compares the two sizes' best of three (not a wall-clock bound,
// which a loaded machine breaks) and allows up to 24 times.
func TestManyKeysParseInLinearTime(t *testing.T) {
	best := func(data []byte) time.Duration {
		var b time.Duration
		for i := 0; i < 3; i++ {
			start := time.Now()
			if _, err := ReadBytes("many.safetensors", data); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); i == 0 || d < b {
				b = d
			}
		}
		return b
	}
	data := manyKeys(80000)
	f, err := ReadBytes("many.safetensors", data)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Tensors) != 80000 || len(f.Metadata) != 80000 {
		t.Fatalf("read %d tensors and %d metadata keys, want 80000 of each", len(f.Tensors), len(f.Metadata))
	}
	small, large := best(manyKeys(5000)), best(manyKeys(40000))
	if ratio := float64(large) / float64(small); ratio > 24 {
		t.Errorf("a header of 40000 keys took %v, one of 5000 %v: %.0f times as long for 8 times the keys; it must be linear in the keys", large, small, ratio)
	}
	// A duplicate among them is still found, with its key.
	dup := strings.Replace(string(data), `"t79999"`, `"t12345"`, 1)
	if _, err := ReadBytes("dup.safetensors", []byte(dup)); err == nil || !strings.Contains(err.Error(), `duplicate key "t12345"`) {
		t.Errorf("a repeated tensor name among 80000: got %v, want a duplicate key error naming \"t12345\"", err)
	}
}

// TestCheckFinite finds a NaN, +Inf and -Inf by tensor and element, and
// passes finite weights.
func TestCheckFinite(t *testing.T) {
	for _, tc := range []struct {
		v    float32
		want string
	}{{float32(math.NaN()), "NaN"}, {float32(math.Inf(1)), "+Inf"}, {float32(math.Inf(-1)), "-Inf"}} {
		data := handMade(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[3],"data_offsets":[8,20]}}`, f32le(1, 2, 3, tc.v, 5))
		f, err := ReadBytes("w.safetensors", data)
		if err != nil {
			t.Fatal(err)
		}
		err = f.CheckFinite()
		if err == nil || !strings.Contains(err.Error(), `w.safetensors: tensor "b" holds `+tc.want+` at element 1`) {
			t.Errorf("%v in tensor b: got %v", tc.v, err)
		}
	}
	f, err := ReadBytes("w.safetensors", handMade(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, f32le(1, -math.MaxFloat32)))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.CheckFinite(); err != nil {
		t.Errorf("finite weights: %v", err)
	}
}
