package app

import (
	"encoding/json"
	"io"
)

// predictionJSON is one line of `predict --json`.
type predictionJSON struct {
	Input  string      `json:"input"`
	Class  *int        `json:"class,omitempty"`
	Label  string      `json:"label,omitempty"`
	P      float64     `json:"p,omitempty"`
	Top    []classProb `json:"top,omitempty"`
	Values []float32   `json:"values,omitempty"` // regression outputs
}

// classProb is a class with its probability.
type classProb struct {
	Class int     `json:"class"`
	Label string  `json:"label"`
	P     float64 `json:"p"`
}

// printPredictionJSON prints one sample's prediction as a JSON object on
// its own line, for scripts: the most probable class (its index and its
// label), its probability and the top classes; or a regression's values.
func printPredictionJSON(w io.Writer, name string, out []float32, top int, names []string, regression bool) error {
	r := predictionJSON{Input: name}
	if regression {
		r.Values = out
	} else {
		probs, order := rankClasses(out)
		best := order[0]
		r.Class, r.Label, r.P = &best, names[best], probs[best]
		for _, c := range order[:top] {
			r.Top = append(r.Top, classProb{c, names[c], probs[c]})
		}
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}
