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
	return append(out, missingLayerFields(v, pos)...)
}

// missingLayerFields names the required fields each layer leaves out (a
// conv2d without outChannels), at the layer. CUE reports one itself only
// when nothing else is wrong in the layer: a misspelt outChanels hides the
// missing outChannels.
func missingLayerFields(v cue.Value, pos *positions) Errors {
	var out Errors
	check := func(layer cue.Value, path []string) {
		it, err := layer.Fields()
		if err != nil {
			return
		}
		for it.Next() {
			f := it.Value()
			sel := it.Selector()
			if sel.LabelType() != cue.StringLabel || sel.ConstraintType() >= cue.PatternConstraint {
				continue
			}
			name := sel.Unquoted()
			if isComputedField(name) || name == "op" || f.IsConcrete() {
				continue
			}
			if _, isDefault := f.Default(); isDefault {
				continue
			}
			if f.IncompleteKind() == cue.ListKind {
				continue // a list (reshape's shape) is checked by the schema
			}
			where, ok := pos.lookup(path)
			if !ok {
				where = pos.firstFile()
			}
			what := describeKind(f)
			if len(what) > 40 { // kernel's int-or-pair bounds: the kinds say it better
				what = strings.Trim(f.IncompleteKind().String(), "()")
				what = strings.ReplaceAll(what, "|", " or ")
			}
			out = append(out, Error{Pos: where, Layer: layerName(path, &v), Message: fmt.Sprintf("missing required field %s (%s)", name, what)})
		}
	}
	for _, form := range []string{"layers", "nodes"} {
		g := v.LookupPath(cue.MakePath(cue.Str("model"), cue.Str(form)))
		if !g.Exists() {
			continue
		}
		if form == "layers" {
			// by index: a list with an illegal element does not iterate
			for i := 0; ; i++ {
				l := g.LookupPath(cue.MakePath(cue.Index(i)))
				if !l.Exists() {
					break
				}
				check(l, []string{"model", form, fmt.Sprint(i)})
			}
		} else if it, err := g.Fields(); err == nil {
			for it.Next() {
				if sel := it.Selector(); sel.LabelType() == cue.StringLabel && sel.ConstraintType() < cue.PatternConstraint {
					check(it.Value(), []string{"model", form, sel.Unquoted()})
				}
			}
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
	// a field is keyed by its layer (none for settings) and name
	reported := map[string]bool{}
	for _, e := range es {
		if strings.HasPrefix(e.Message, "missing required field ") {
			field, _, _ := strings.Cut(strings.TrimPrefix(e.Message, "missing required field "), " ")
			reported[e.Layer+"\x00"+field] = true
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
		if !reported[m.Layer+"\x00"+field] {
			out = append(out, m)
		}
	}
	return out
}
