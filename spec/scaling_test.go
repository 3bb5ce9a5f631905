package spec

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// deepSpec is a spec of n layers (dense and relu in turn) in the
// sequential form, or the same chain of nodes in the graph form.
func deepSpec(n int, graph bool) []byte {
	var b strings.Builder
	b.WriteString("package p\n\nimport \"github.com/mlbuild/mlbuild/schema\"\n\nschema.#Spec & {\n\tname: \"deep\"\n\tmodel: {\n\t\tinput: [8]\n")
	if graph {
		b.WriteString("\t\tnodes: {\n")
		prev := "input"
		for i := 0; i < n; i++ {
			name := fmt.Sprintf("n%d", i)
			if i%2 == 0 {
				fmt.Fprintf(&b, "\t\t\t%s: {op: \"dense\", inputs: [%q], units: 8}\n", name, prev)
			} else {
				fmt.Fprintf(&b, "\t\t\t%s: {op: \"relu\", inputs: [%q]}\n", name, prev)
			}
			prev = name
		}
		b.WriteString("\t\t}\n")
	} else {
		b.WriteString("\t\tlayers: [\n")
		for i := 0; i < n; i++ {
			if i%2 == 0 {
				b.WriteString("\t\t\t{op: \"dense\", units: 8},\n")
			} else {
				b.WriteString("\t\t\t{op: \"relu\"},\n")
			}
		}
		b.WriteString("\t\t]\n")
	}
	b.WriteString("\t}\n\ttraining: {optimizer: {kind: \"adam\", lr: 1e-3}, epochs: 1, batchSize: 2}\n}\n")
	return []byte(b.String())
}

// TestSequentialScalesLikeGraph: the sequential form costs about what the
// graph form costs. Default names (dense1, relu1, ...) and the check for
// a name used twice once compared every pair of layers, so 400 layers took
// 30 times as long as 400 nodes (20 s against 0.7 s). The fastest of a few
// alternating runs of each is compared, which tolerates a busy machine.
func TestSequentialScalesLikeGraph(t *testing.T) {
	const n = 300
	seq, graph := deepSpec(n, false), deepSpec(n, true)
	best := func(src []byte, d *time.Duration) {
		start := time.Now()
		m, err := LoadBytes("deep.cue", src)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Nodes) != n+1 || m.Nodes[n].Name == "" {
			t.Fatalf("%d nodes, want %d", len(m.Nodes), n+1)
		}
		if took := time.Since(start); *d == 0 || took < *d {
			*d = took
		}
	}
	var s, g time.Duration
	for range 3 {
		best(seq, &s)
		best(graph, &g)
	}
	t.Logf("%d layers: sequential %v, graph %v", n, s, g)
	if s > 4*g+500*time.Millisecond {
		t.Errorf("the sequential form of %d layers took %v, the graph form %v: it should cost about the same", n, s, g)
	}
	// The names are those the schema always gave.
	m, err := LoadBytes("deep.cue", deepSpec(5, false))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, nd := range m.Nodes[1:] {
		names = append(names, nd.Name)
	}
	if got := strings.Join(names, " "); got != "dense1 relu1 dense2 relu2 dense3" {
		t.Errorf("default names %q", got)
	}
}
