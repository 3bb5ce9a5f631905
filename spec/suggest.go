package spec

import (
	"slices"
	"strings"

	"cuelang.org/go/cue"
)

// nearest returns the name among names closest to word by edit distance,
// ignoring case, when it is close enough to be a likely misspelling (a
// third of the word's length, at least 1 and at most 3 edits), or "".
// Ties go to the first name in the list.
func nearest(word string, names []string) string {
	if len(word) > 100 {
		return "" // no misspelling of a short name; and the distance costs len(word)·len(name)
	}
	limit := min(max(len(word)/3, 1), 3)
	best, bestD := "", limit+1
	for _, n := range names {
		if n == word {
			continue
		}
		if d := EditDistance(strings.ToLower(word), strings.ToLower(n)); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// EditDistance is the Levenshtein distance of two short strings, by byte:
// the measure of every "did you mean" mlbuild prints (spec fields and ops
// here, configuration keys and subcommands in cmd/mlbuild).
func EditDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// layerFields lists the fields a user may write in the layer at layerPath,
// as the schema gives its op: required, defaulted and optional ones, not
// the computed ones (in, inShapes, out) nor the fields the layer may not
// have (unknown, keyed by the field's path joined by dots).
func layerFields(layerPath []string, v *cue.Value, unknown map[string]bool) []string {
	return fieldsAt(layerPath, v, unknown)
}

// fieldsAt lists the fields of the struct at path, as layerFields does.
func fieldsAt(layerPath []string, v *cue.Value, unknown map[string]bool) []string {
	if v == nil {
		return nil
	}
	layer := v.LookupPath(cuePath(layerPath))
	it, err := layer.Fields(cue.Optional(true))
	if err != nil {
		return nil
	}
	var out []string
	for it.Next() {
		sel := it.Selector()
		if sel.LabelType() != cue.StringLabel || sel.ConstraintType() >= cue.PatternConstraint {
			continue
		}
		name := sel.Unquoted()
		switch name {
		case "in", "inShapes", "out":
			continue
		}
		if unknown[strings.Join(append(slices.Clone(layerPath), name), ".")] {
			continue
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// suggestOp adds the op nearest to op to the schema's unknown-op message,
// `unknown op "conv2f"; the ops are dense, …`, taking the ops from the
// list the message gives (the schema's #Ops).
func suggestOp(msg, op string) string {
	const listed = "; the ops are "
	i := strings.Index(msg, listed)
	if i < 0 {
		return msg
	}
	near := nearest(op, strings.Split(msg[i+len(listed):], ", "))
	if near == "" {
		return msg
	}
	return msg[:i] + " (did you mean \"" + near + "\"?)" + msg[i:]
}
