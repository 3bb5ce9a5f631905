package app

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"

	"github.com/mlbuild/mlbuild/rt/cpu"
	"github.com/mlbuild/mlbuild/rt/idx"
)

// evalResult is the outcome of running the inference plan over a set.
type evalResult struct {
	Accuracy float64 `json:"accuracy"`
	Loss     float64 `json:"loss"`
	Samples  int     `json:"samples"`
	Correct  int     `json:"correct"`
	accuracy float64
	loss     float64
}

// evaluate runs the inference plan (batch by batch, padding the last one)
// over the images named by indices and returns accuracy and mean loss.
func evaluate(m Model, images *idx.Images, labels *idx.Labels, indices []int, meta *Meta) evalResult {
	B, C := meta.Batch, meta.Classes
	x := m.InferInput(false)
	onehot := make([]float32, B*C)
	var lossSum float64
	correct := 0
	for start := 0; start < len(indices); start += B {
		n := min(B, len(indices)-start)
		chunk := indices[start : start+n]
		per := len(x) / B
		images.Batch(x[:n*per], chunk)
		clear(x[n*per:])
		labels.OneHot(onehot[:n*C], chunk, C)
		out := m.Infer(false)
		for r := 0; r < n; r++ {
			logits := out[r*C : (r+1)*C]
			lab := onehot[r*C : (r+1)*C]
			if cpu.Argmax(logits) == cpu.Argmax(lab) {
				correct++
			}
			lossSum += sampleLoss(meta.Defaults.Loss, logits, lab)
		}
	}
	r := evalResult{Samples: len(indices), Correct: correct}
	if len(indices) > 0 {
		r.Accuracy = float64(correct) / float64(len(indices))
		r.Loss = lossSum / float64(len(indices))
	}
	r.accuracy, r.loss = r.Accuracy, r.Loss
	return r
}

// sampleLoss is one sample's loss, the same quantity training minimises.
func sampleLoss(kind string, out, target []float32) float64 {
	if kind == "mse" {
		var s float64
		for i := range out {
			d := float64(out[i] - target[i])
			s += d * d
		}
		return s / float64(len(out))
	}
	mx := math.Inf(-1)
	for _, v := range out {
		mx = math.Max(mx, float64(v))
	}
	var sum float64
	for _, v := range out {
		sum += math.Exp(float64(v) - mx)
	}
	lse := mx + math.Log(sum)
	var l float64
	for i, t := range target {
		l -= float64(t) * (float64(out[i]) - lse)
	}
	return l
}

func evalCmd(m Model, args []string, stdout, stderr io.Writer) error {
	meta := m.Meta()
	fs := newFlags(meta, "eval")
	data := fs.String("data", "", "the `DIR` holding the test IDX files ("+meta.Defaults.TestImages+", "+meta.Defaults.TestLabels+")")
	weights := fs.String("weights", "", "the trained weights `FILE` (safetensors), e.g. the output of train")
	asJSON := fs.Bool("json", false, "print one JSON object")
	threads := fs.Int("threads", 0, "use `N` CPU threads (0: all)")
	if err := noOperands(fs, args, stdout); err != nil {
		return err
	}
	if *data == "" || *weights == "" {
		return usageError{"eval needs --data DIR and --weights FILE"}
	}
	if err := checkThreads(*threads); err != nil {
		return err
	}
	cpu.SetThreads(*threads)
	if err := loadWeights(m, *weights); err != nil {
		return err
	}
	ds, err := openPair(meta, filepath.Join(*data, meta.Defaults.TestImages), filepath.Join(*data, meta.Defaults.TestLabels))
	if err != nil {
		return err
	}
	defer ds.close()
	all := make([]int, ds.n)
	for i := range all {
		all[i] = i
	}
	r := evaluate(m, ds.images, ds.labels, all, meta)
	if *asJSON {
		return json.NewEncoder(stdout).Encode(r)
	}
	fmt.Fprintf(stdout, "samples: %d\ncorrect: %d\nloss: %.4f\naccuracy: %.4f\n", r.Samples, r.Correct, r.Loss, r.Accuracy)
	return nil
}
