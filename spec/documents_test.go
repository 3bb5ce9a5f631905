package spec

import "testing"

// TestTextDocumentsDecoded: a text dataset's documents separator reaches
// Dataset.Documents as written (escapes decoded), and is "" without it.
func TestTextDocumentsDecoded(t *testing.T) {
	for _, tc := range []struct{ field, want string }{
		{`, documents: "\n\n"`, "\n\n"},
		{`, documents: "<|endoftext|>"`, "<|endoftext|>"},
		{"", ""},
	} {
		m, err := LoadBytes("text.cue", []byte(`package p
import "github.com/mlbuild/mlbuild/schema"
schema.#Spec & {
	name: "m"
	model: {input: [16], layers: [{op: "dense", units: 65}]}
	training: {optimizer: {kind: "adam", lr: 1e-3}, epochs: 1, batchSize: 8}
	dataset: {format: "text", files: ["a.txt"], classes: 65`+tc.field+`}
}`))
		if err != nil {
			t.Fatalf("%q: %v", tc.field, err)
		}
		if m.Dataset.Documents != tc.want {
			t.Errorf("%q: Documents %q, want %q", tc.field, m.Dataset.Documents, tc.want)
		}
	}
}
