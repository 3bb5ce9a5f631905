package app

import (
	"fmt"
	"io"
	"math"

	"github.com/mlbuild/mlbuild/rt/cpu"
	"github.com/mlbuild/mlbuild/rt/jsontext"
)

// evalResult is the outcome of running the inference plan over a set.
type evalResult struct {
	Accuracy float64
	Loss     float64
	Samples  int
	Correct  int
	// Regression: mean squared and absolute errors and the coefficient of
	// determination, in the targets' own units (averaged over targets).
	MSE, MAE, R2 *float64
	// Confusion counts samples by true class (rows) and predicted class
	// (columns), when asked for.
	Confusion [][]int
	accuracy  float64
	loss      float64
}

// writeJSON prints the result as `eval --json` does: one object on a line,
// split naming the samples. A regression's object has its error measures
// (mse, mae, r2) and no accuracy or correct count, which it has not.
func (r *evalResult) writeJSON(w io.Writer, split string) error {
	reg := r.MSE != nil
	j := jsontext.NewWriter("")
	j.BeginObject()
	if !reg {
		j.Key("accuracy")
		j.Float(r.Accuracy, 64)
	}
	j.Key("loss")
	j.Float(r.Loss, 64)
	j.Key("samples")
	j.Int(int64(r.Samples))
	if !reg {
		j.Key("correct")
		j.Int(int64(r.Correct))
	}
	for _, f := range []struct {
		key string
		v   *float64
	}{{"mse", r.MSE}, {"mae", r.MAE}, {"r2", r.R2}} {
		if f.v != nil {
			j.Key(f.key)
			j.Float(*f.v, 64)
		}
	}
	if len(r.Confusion) > 0 {
		j.Key("confusion")
		j.BeginArray()
		for _, row := range r.Confusion {
			j.Ints(row)
		}
		j.EndArray()
	}
	j.Key("split")
	j.String(split)
	j.EndObject()
	_, err := w.Write(append(j.Bytes(), '\n'))
	return err
}

// evaluate runs the inference plan (batch by batch; a short last batch
// one sample at a time when that is cheaper, see rowInference)
// over the samples named by indices and returns accuracy (or, for
// regression, the error measures) and mean loss.
func evaluate(m Model, ds *dataset, indices []int, meta *Meta) (evalResult, error) {
	if ds.text != nil {
		return ds.text.evaluate(m, ds, indices, meta)
	}
	B, C := meta.Batch, meta.Classes
	x := m.InferInput(false)
	labels := make([]float32, B*C)
	pred := make([]float32, C)
	truth := make([]float32, C)
	reg := meta.regression()
	var rec record
	if ds.rec != nil {
		rec = *ds.rec
	}
	var lossSum, se, ae float64
	seJ, sumY, sumY2 := make([]float64, C), make([]float64, C), make([]float64, C)
	correct := 0
	r := evalResult{Samples: len(indices)}
	if !reg {
		r.Confusion = make([][]int, C)
		for i := range r.Confusion {
			r.Confusion[i] = make([]int, C)
		}
	}
	per := len(x) / B
	rows := newRowInference(m)
	loader := newBatchLoader(ds, B)
	defer loader.stop()
	loader.start(indices)
	for start := 0; start < len(indices); start += B {
		n := min(B, len(indices)-start)
		if err := loader.next(x[:n*per], labels[:n*C]); err != nil {
			return evalResult{}, err
		}
		out := rows.run(x, n)
		for i := 0; i < n; i++ {
			o := out[i*C : (i+1)*C]
			lab := labels[i*C : (i+1)*C]
			lossSum += sampleLoss(meta.Defaults, o, lab)
			if !reg {
				p, t := cpu.Argmax(o), cpu.Argmax(lab)
				if p == t {
					correct++
				}
				r.Confusion[t][p]++
				continue
			}
			copy(pred, o)
			copy(truth, lab)
			unstandardize(pred, C, rec.tmean, rec.tstd)
			unstandardize(truth, C, rec.tmean, rec.tstd)
			for j := range pred {
				d := float64(pred[j]) - float64(truth[j])
				se += d * d
				seJ[j] += d * d
				ae += math.Abs(d)
				sumY[j] += float64(truth[j])
				sumY2[j] += float64(truth[j]) * float64(truth[j])
			}
		}
	}
	r.Correct = correct
	if n := len(indices); n > 0 {
		r.Accuracy = float64(correct) / float64(n)
		r.Loss = lossSum / float64(n)
		if reg {
			mse, mae := se/float64(n*C), ae/float64(n*C)
			r2 := rSquared(seJ, sumY, sumY2, n)
			r.MSE, r.MAE, r.R2 = &mse, &mae, &r2
		}
	}
	r.accuracy, r.loss = r.Accuracy, r.Loss
	return r, nil
}

// rSquared is the coefficient of determination 1 − SS_res/SS_tot of each
// target, averaged over targets (scikit-learn's r2_score), from each
// target's residual sum of squares and its sums of y and y² over n
// samples. A constant target scores 1 when predicted exactly, else 0.
func rSquared(seJ, sumY, sumY2 []float64, n int) float64 {
	var r2 float64
	for j := range seJ {
		mean := sumY[j] / float64(n)
		tot := sumY2[j] - float64(n)*mean*mean
		switch {
		case tot > 1e-12*max(sumY2[j], 1):
			r2 += 1 - seJ[j]/tot
		case seJ[j] == 0:
			r2++
		}
	}
	return r2 / float64(len(seJ))
}

// sampleLoss is one sample's loss, the same quantity training minimises.
func sampleLoss(d Defaults, out, target []float32) float64 {
	switch d.Loss {
	case "mae":
		var s float64
		for i := range out {
			s += math.Abs(float64(out[i] - target[i]))
		}
		return s / float64(len(out))
	case "huber":
		delta := d.HuberDelta
		if !(delta > 0) {
			delta = 1
		}
		var s float64
		for i := range out {
			a := math.Abs(float64(out[i] - target[i]))
			if a <= delta {
				s += 0.5 * a * a
			} else {
				s += delta * (a - 0.5*delta)
			}
		}
		return s / float64(len(out))
	}
	if d.Loss == "mse" {
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
	data := fs.String("data", "", "the `DIR` holding the test data ("+dataFiles(meta, false)+")")
	weights := fs.String("weights", "", weightsUsage(meta))
	asJSON := fs.Bool("json", false, "print one JSON object")
	confusion := fs.Bool("confusion", false, "classification: also print the confusion matrix (rows: true class, columns: predicted)")
	threads := fs.Int("threads", 0, "use `N` CPU threads (0: all)")
	sel := addEvalSelection(fs, meta.Defaults)
	if err := noOperands(fs, args, stdout); err != nil {
		return err
	}
	if err := weightsRequired(meta, *weights, "eval needs --weights FILE (this program has no embedded weights) and --data DIR (or --images FILE and --labels FILE)"); err != nil {
		return err
	}
	if *data == "" && sel.images == "" {
		return usageError{"eval needs --data DIR (or --images FILE and --labels FILE)"}
	}
	if *confusion && meta.regression() {
		return usageError{"--confusion counts samples by true and predicted class, but this model is a regression: it has no classes (eval prints its mse, mae and r2)"}
	}
	if err := checkThreads(*threads); err != nil {
		return err
	}
	cpu.SetThreads(*threads)
	if err := loadWeights(m, *weights); err != nil {
		return err
	}
	md, err := weightsMetadata(meta, *weights)
	if err != nil {
		return err
	}
	if err := sel.adopt(md, flagsGiven(fs), stderr); err != nil {
		return err
	}
	ds, indices, what, err := sel.open(meta, *data)
	if err != nil {
		return err
	}
	defer ds.close()
	r, err := evaluate(m, ds, indices, meta)
	if err != nil {
		return err
	}
	if !*confusion {
		r.Confusion = nil
	}
	if *asJSON {
		return r.writeJSON(stdout, what)
	}
	if what != "test" {
		fmt.Fprintf(stdout, "images: %s\n", what)
	}
	if meta.regression() {
		fmt.Fprintf(stdout, "samples: %d\nloss: %.4f\nmse: %.4f\nmae: %.4f\nr2: %.4f\n", r.Samples, r.Loss, *r.MSE, *r.MAE, *r.R2)
		return nil
	}
	fmt.Fprintf(stdout, "samples: %d\ncorrect: %d\nloss: %.4f\naccuracy: %.4f\n", r.Samples, r.Correct, r.Loss, r.Accuracy)
	if r.Confusion != nil {
		printConfusion(stdout, r.Confusion, classLabels(meta))
	}
	return nil
}

// printConfusion prints the confusion matrix with the class names.
func printConfusion(w io.Writer, c [][]int, names []string) {
	tw := newColumns(w, true)
	fmt.Fprint(tw, "true \\ predicted\t")
	for _, n := range names {
		fmt.Fprintf(tw, "%s\t", n)
	}
	fmt.Fprintln(tw)
	for i, row := range c {
		fmt.Fprintf(tw, "%s\t", names[i])
		for _, v := range row {
			fmt.Fprintf(tw, "%d\t", v)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}
