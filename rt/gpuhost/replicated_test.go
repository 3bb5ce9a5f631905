package gpuhost

import (
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/rt/app"
)

// TestForGPUs: a replica's program has its share's tables and batch and
// the program's state; a count without tables is refused with the counts
// the program has.
func TestForGPUs(t *testing.T) {
	fwd := []PlanStep{{Name: "replica forward"}}
	p := &Program{Meta: &app.Meta{Name: "m", Batch: 8}, StateSize: 100, TrainInputSize: 8 * 3, TrainWorkSize: 50,
		EvalInfer: []PlanStep{{Name: "infer"}}, Decode: &Decode{Context: 4}, DecodeWorkSize: 10,
		Replicas: []Replica{{GPUs: 2, TrainInputSize: 4 * 3, TrainWorkSize: 25, TrainForward: fwd}, {GPUs: 4, TrainInputSize: 2 * 3}}}
	if q, err := p.ForGPUs(1); err != nil || q != p {
		t.Errorf("ForGPUs(1) = %p, %v; want the program itself", q, err)
	}
	q, err := p.ForGPUs(2)
	if err != nil {
		t.Fatal(err)
	}
	if q.Meta.Batch != 4 || q.TrainInputSize != 12 || q.TrainWorkSize != 25 || len(q.TrainForward) != 1 || q.TrainForward[0].Name != "replica forward" ||
		q.StateSize != 100 || len(q.EvalInfer) != 1 || q.Replicas != nil {
		t.Errorf("ForGPUs(2): batch %d, input %d, work %d, forward %v, state %d, inference %v, replicas %v",
			q.Meta.Batch, q.TrainInputSize, q.TrainWorkSize, q.TrainForward, q.StateSize, q.EvalInfer, q.Replicas)
	}
	if q.Decode != nil || q.DecodeWorkSize != 0 {
		t.Errorf("ForGPUs(2) keeps the KV-cache decode (%v, %d values), which a training replica never runs", q.Decode, q.DecodeWorkSize)
	}
	if p.Meta.Batch != 8 || p.TrainInputSize != 24 || p.Decode == nil {
		t.Errorf("ForGPUs changed the program: batch %d, input %d", p.Meta.Batch, p.TrainInputSize)
	}
	_, err = p.ForGPUs(3)
	if err == nil || !strings.Contains(err.Error(), "1 or 2 or 4 GPU(s), not 3") || !strings.Contains(err.Error(), "batch of 8") {
		t.Errorf("ForGPUs(3): %v; want a refusal listing 1, 2 and 4", err)
	}
	if _, err := NewReplicated(nil, nil, p, 0); err == nil {
		t.Errorf("NewReplicated of no GPUs: no error")
	}
}

// TestSyncBNRefusedWithReason: a replica whose batch norms have no
// synchronised kernels (Replica.NoSyncBN) refuses --sync-bn with the
// emitter's reason, before it looks for the steps.
func TestSyncBNRefusedWithReason(t *testing.T) {
	p := &Program{Meta: &app.Meta{Name: "resnet"}, noSyncBN: "batch norm bn1 reads x, stored channels last"}
	if _, err := p.withSyncBN(); err == nil || !strings.Contains(err.Error(), "--sync-bn: resnet: batch norm bn1 reads x, stored channels last") {
		t.Errorf("withSyncBN: %v, want the reason", err)
	}
	p.noSyncBN = ""
	if _, err := p.withSyncBN(); err == nil || !strings.Contains(err.Error(), "no batch norm layer") {
		t.Errorf("withSyncBN without steps: %v, want no batch norm layer", err)
	}
}
