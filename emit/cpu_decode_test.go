package emit

import (
	"bytes"
	"testing"
)

// TestDecodeBF16Source: a language model's program has the bf16 decode of
// generate --precision bf16, defaulting to it where the spec trains in
// bf16 and not otherwise: each dense step of the decode with its bf16
// branch, the weights rounded once in DecodeBF16, the prefill with its
// cache copies and the selftest's bf16 row.
func TestDecodeBF16Source(t *testing.T) {
	for _, c := range []struct {
		file string
		def  string
	}{
		{"../testdata/specs/valid/gpt_tiny.cue", "func (model) DefaultBF16() bool { return false }"},
		{"../testdata/specs/bf16/gpt_tiny_bf16.cue", "func (model) DefaultBF16() bool { return true }"},
	} {
		src, err := ModelSource(inputFor(t, c.file, true))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{c.def, "func (model) DecodeBF16(on bool) {", "cpu.ToBF16(dW16[", "if dBF16 {\n\t\tcpu.GemvBF16(",
			"cpu.GemvF32(", "func dPrefill() {", "\tdPrefill()\n", "func (m model) KVCacheBF16Check() app.SelfTestRow"} {
			if !bytes.Contains(src, []byte(want)) {
				t.Errorf("%s: the program has no %q", c.file, want)
			}
		}
		if gemv, branch := bytes.Count(src, []byte("cpu.GemvF32(")), bytes.Count(src, []byte("cpu.GemvBF16(")); gemv != branch {
			t.Errorf("%s: %d dense decode steps, %d with a bf16 branch", c.file, gemv, branch)
		}
	}
}
