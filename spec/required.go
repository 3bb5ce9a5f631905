package spec

import (
	"fmt"
	"strings"

	"cuelang.org/go/cue"
)

// missingFields names every required setting the spec leaves out, in the
// parts of the spec that are settings rather than layers: training and
// dataset. CUE reports some of them itself, but a missing value that the
// schema tests in a condition (training.optimizer.kind decides which other
// optimizer fields exist) surfaces only as "non-concrete value in operand
// to ==" at the embedding, and hides the rest.
func missingFields(v cue.Value, pos *positions) Errors {
	var out Errors
	var walk func(v cue.Value, path []string)
	walk = func(v cue.Value, path []string) {
		// A struct whose condition failed is bottom but still lists its
		// fields.
		if k := v.IncompleteKind(); k == cue.StructKind || k == cue.BottomKind {
			if it, err := v.Fields(); err == nil {
				n := 0
				for it.Next() {
					n++
					walk(it.Value(), append(path[:len(path):len(path)], it.Selector().String()))
				}
				if n > 0 || k == cue.StructKind {
					return
				}
			}
		}
		if v.IsConcrete() || v.IncompleteKind()&cue.ListKind != 0 {
			return
		}
		if _, isDefault := v.Default(); isDefault {
			return
		}
		where, ok := pos.lookup(path)
		if !ok {
			where = pos.firstFile()
		}
		out = append(out, Error{Pos: where, Message: fmt.Sprintf("missing required field %s (%s)", strings.Join(path, "."), describeKind(v))})
	}
	for _, part := range []string{"training", "dataset"} {
		p := v.LookupPath(cue.ParsePath(part))
		if p.Exists() {
			walk(p, []string{part})
		}
	}
	return out
}

// describeKind says what a missing field must hold: its constraint as the
// schema writes it ("int & >=1"), or its kind.
func describeKind(v cue.Value) string {
	if s := fmt.Sprint(v); s != "" && !strings.ContainsAny(s, "\n{") {
		return s
	}
	return v.IncompleteKind().String()
}

// withMissingFields adds the missing settings to the errors of a spec,
// once each, and drops the messages that only follow from them: a value
// that cannot be computed, or a field reported twice.
func withMissingFields(es Errors, missing Errors) Errors {
	if len(missing) == 0 {
		return es
	}
	reported := map[string]bool{}
	for _, e := range es {
		if strings.HasPrefix(e.Message, "missing required field ") {
			field, _, _ := strings.Cut(strings.TrimPrefix(e.Message, "missing required field "), " ")
			reported[field] = true
		}
	}
	var out Errors
	for _, e := range es {
		if strings.Contains(e.Message, "in operand to") { // a condition on a missing value
			continue
		}
		out = append(out, e)
	}
	for _, m := range missing {
		field, _, _ := strings.Cut(strings.TrimPrefix(m.Message, "missing required field "), " ")
		if !reported[field] {
			out = append(out, m)
		}
	}
	return out
}
