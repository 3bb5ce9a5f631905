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

// TestManyKeysParseInLinearTime reads a header of 80 000 tensors and
// 80 000 metadata keys. The duplicate-key check compared each key with
// every earlier one, which took 23 s for such a header; it must take well
// under a second (the bound leaves room for a loaded machine).
func TestManyKeysParseInLinearTime(t *testing.T) {
	data := manyKeys(80000)
	start := time.Now()
	f, err := ReadBytes("many.safetensors", data)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Tensors) != 80000 || len(f.Metadata) != 80000 {
		t.Fatalf("read %d tensors and %d metadata keys, want 80000 of each", len(f.Tensors), len(f.Metadata))
	}
	if took > 3*time.Second {
		t.Errorf("reading a header of 80000 tensors and 80000 metadata keys took %v; it must be linear in the keys", took)
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
