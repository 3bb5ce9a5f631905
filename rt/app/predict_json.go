package app

import (
	"io"

	"github.com/mlbuild/mlbuild/rt/jsontext"
)

// printPredictionJSON prints one sample's prediction as a JSON object on
// its own line, for scripts: {"input", "class", "label", "p", "top"}, the
// most probable class (its index and its label), its probability and the
// top classes (each {"class", "label", "p"}); or, for regression,
// {"input", "values"}.
func printPredictionJSON(w io.Writer, name string, out []float32, top int, names []string, regression bool) error {
	j := jsontext.NewWriter("")
	j.BeginObject()
	j.Key("input")
	j.String(name)
	if regression {
		if len(out) > 0 {
			j.Key("values")
			j.BeginArray()
			for _, v := range out {
				j.Float(float64(v), 32)
			}
			j.EndArray()
		}
	} else {
		probs, order := rankClasses(out)
		best := order[0]
		j.Key("class")
		j.Int(int64(best))
		if names[best] != "" {
			j.Key("label")
			j.String(names[best])
		}
		if probs[best] != 0 {
			j.Key("p")
			j.Float(probs[best], 64)
		}
		if top > 0 {
			j.Key("top")
			j.BeginArray()
			for _, c := range order[:top] {
				j.BeginObject()
				j.Key("class")
				j.Int(int64(c))
				j.Key("label")
				j.String(names[c])
				j.Key("p")
				j.Float(probs[c], 64)
				j.EndObject()
			}
			j.EndArray()
		}
	}
	j.EndObject()
	_, err := w.Write(append(j.Bytes(), '\n'))
	return err
}
