package spec

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/token"
)

// translateAll turns CUE's errors into Errors a user can act on: each one
// positioned at the user's line, attributed to a layer, and with the field
// it concerns spelled out. Messages written by the schema's checks are kept
// as they are; CUE's own messages get the field name and, for the common
// kinds, a plainer wording. Errors that only follow from another one (a
// shape left unknown because an earlier layer is illegal) are dropped when
// a cause was found.
func (p *positions) translateAll(err error, v *cue.Value) Errors {
	var causes, followers Errors
	seen := map[string]bool{}
	// the fields written where they are not allowed, so that a suggestion
	// for one misspelt field does not offer another
	notAllowed := map[string]bool{}
	for _, e := range cueerrors.Errors(err) {
		if format, args := e.Msg(); strings.Contains(fmt.Sprintf(format, args...), "field not allowed") {
			notAllowed[strings.Join(unquoted(e.Path()), ".")] = true
		}
	}
	for _, e := range cueerrors.Errors(err) {
		te, follower, ok := p.translate(e, v, notAllowed)
		if !ok {
			continue
		}
		key := te.Error()
		if seen[key] {
			continue
		}
		seen[key] = true
		if follower {
			followers = append(followers, te)
		} else {
			causes = append(causes, te)
		}
	}
	out := dropConflictEchoes(causes)
	if len(out) == 0 {
		out = followers
	}
	if len(out) == 0 {
		// CUE reported something none of the rules above recognise: say so
		// rather than print nothing.
		out = Errors{{Pos: p.firstFile(), Message: "the spec is not valid: " + shortenMessage(cueerrors.Details(err, nil))}}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].Pos, out[j].Pos
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
	return out
}

// dropConflictEchoes removes CUE's "conflicting values" messages at a
// position that has another, plainer message: a value outside its bounds
// also conflicts with the field's default, and the bound is what the user
// needs to read.
func dropConflictEchoes(es Errors) Errors {
	plain := map[Pos]bool{}
	for _, e := range es {
		if !strings.Contains(e.Message, "conflicting values") {
			plain[e.Pos] = true
		}
	}
	var out Errors
	for _, e := range es {
		if strings.Contains(e.Message, "conflicting values") && plain[e.Pos] {
			continue
		}
		out = append(out, e)
	}
	return out
}

// translate converts one CUE error. follower reports that the error is only
// a consequence of another (an unknown shape); ok is false for errors that
// merely group others (empty disjunctions, whose parts come separately).
func (p *positions) translate(e cueerrors.Error, v *cue.Value, notAllowed map[string]bool) (te Error, follower, ok bool) {
	path := unquoted(e.Path())
	format, args := e.Msg()
	raw := shortenMessage(fmt.Sprintf(format, args...))
	if strings.Contains(raw, "errors in empty disjunction") {
		return Error{}, false, false
	}

	layerPath, rest := splitLayerPath(path)
	if layerPath != nil {
		te.Layer = layerName(layerPath, v)
	}
	field := visibleField(rest)
	if layerPath == nil {
		field = visibleField(path)
	}
	field = Short(field)
	fromSchemaCheck := len(path) > 0 && strings.HasSuffix(path[len(path)-1], "Err") && slices.ContainsFunc(path, func(l string) bool { return strings.HasPrefix(l, "_check") })

	switch {
	case fromSchemaCheck && (strings.TrimSpace(raw) == "" || raw == "invalid interpolation"):
		// A check whose message could not be formatted because a value
		// it quotes is unknown: a consequence of another error.
		follower = true
		te.Message = "the shape here cannot be computed"
	case fromSchemaCheck:
		te.Message = raw
		if te.Layer != "" {
			te.Message = strings.TrimPrefix(raw, "layer "+Short(te.Layer)+": ")
		}
		if path[len(path)-1] == "opErr" {
			te.Message = suggestOp(te.Message, layerOp(layerPath, v))
		}
	case strings.Contains(raw, "incomplete value") || strings.Contains(raw, "non-concrete value") || strings.HasPrefix(raw, "incomplete"):
		// A value the schema computes in a hidden field (model._batch when
		// training.batchSize is illegal) is incomplete because of another
		// error, not because the user left a field out.
		inHidden := slices.ContainsFunc(path, func(l string) bool { return strings.HasPrefix(l, "_") })
		if field == "" || isComputedField(field) || inHidden {
			follower = true
			te.Message = "the shape here cannot be computed (" + raw + ")"
			if field != "" {
				te.Message = field + " cannot be computed (" + raw + ")"
			}
		} else {
			te.Message = fmt.Sprintf("missing required field %s (%s)", field, strings.TrimPrefix(strings.TrimPrefix(raw, "incomplete value "), "non-concrete value "))
		}
	case strings.Contains(raw, "field not allowed"):
		name := ""
		if len(path) > 0 {
			name = path[len(path)-1]
		}
		if te.Layer != "" {
			op := Short(layerOp(layerPath, v))
			te.Message = fmt.Sprintf("%s layers have no field %s", op, QuoteShort(name))
			fields := layerFields(layerPath, v, notAllowed)
			if near := nearest(name, fields); near != "" {
				te.Message += fmt.Sprintf("; did you mean %s?", near)
			} else if len(fields) > 0 {
				te.Message += fmt.Sprintf(" (%s layers have %s)", op, strings.Join(fields, ", "))
			}
		} else {
			parent := path[:max(len(path)-1, 0)]
			te.Message = fmt.Sprintf("field %s is not allowed here (in %s)", QuoteShort(name), Short(strings.Join(parent, ".")))
			if near := nearest(name, fieldsAt(parent, v, notAllowed)); near != "" {
				te.Message += fmt.Sprintf("; did you mean %s?", near)
			}
		}
	case strings.HasPrefix(raw, "invalid value") && strings.Contains(raw, "out of bound"):
		// "invalid value 0 (out of bound >=1)"
		val, bound := raw, ""
		if i := strings.Index(raw, " (out of bound "); i >= 0 {
			val = strings.TrimPrefix(raw[:i], "invalid value ")
			bound = strings.TrimSuffix(raw[i+len(" (out of bound "):], ")")
		}
		te.Message = fmt.Sprintf("%s is %s but must be %s", orValue(field), val, bound)
		if strings.HasSuffix(bound, fmt.Sprint(MaxCount)) {
			te.Message += " (2^40: mlbuild's bound on every size and count, see docs/specs.md)"
		}
	case strings.Contains(raw, "conflicting values"):
		if strings.Contains(raw, "mismatched types") {
			te.Message = fmt.Sprintf("%s has the wrong type: %s", orValue(field), raw)
		} else {
			te.Message = fmt.Sprintf("%s: %s", orValue(field), raw)
		}
	case strings.Contains(raw, "undefined field"):
		te.Message = fmt.Sprintf("%s refers to something that does not exist: %s", orValue(field), raw)
	default:
		te.Message = raw
		if field != "" {
			te.Message = field + ": " + raw
		}
	}

	// A complaint about a value the schema computes (a layer's out or
	// inShapes), about a message that could not be formatted, or about an
	// argument of a builtin such as list.Product (its path is an index into
	// the argument, not a path of the spec) repeats a problem reported at
	// its source.
	if !fromSchemaCheck && ((te.Layer != "" && isComputedField(field)) || strings.Contains(raw, "invalid interpolation") || builtinArgument(path)) {
		follower = true
	}

	// Where: a user position among CUE's, unless the error is a schema check
	// (all its positions are in the schema), then where the user wrote the
	// layer or field.
	found := false
	if !fromSchemaCheck {
		for _, tp := range append([]token.Pos{e.Position()}, e.InputPositions()...) {
			if up, ok := p.userPos(tp); ok {
				te.Pos, found = up, true
				break
			}
		}
	}
	if !found && fromSchemaCheck {
		// a check named after a field ("kindErr") points at that field
		label := strings.TrimSuffix(path[len(path)-1], "Err")
		prefix := visibleField(path)
		cands := []string{prefix + "." + label, "dataset." + label, "training." + label, "model." + label, label}
		if layerPath != nil {
			cands = cands[:1] // a layer's check points into that layer only
		}
		for _, cand := range cands {
			if tp, ok := p.paths[strings.TrimPrefix(cand, ".")]; ok {
				if up, ok := p.userPos(tp); ok {
					te.Pos, found = up, true
					break
				}
			}
		}
	}
	if !found {
		if up, ok := p.lookup(path); ok {
			te.Pos, found = up, true
		}
	}
	if !found {
		te.Pos = p.firstFile()
	}
	return te, follower, true
}

// unquoted returns a copy of an error path with its labels unquoted: CUE
// quotes labels that are not identifiers ("9a").
func unquoted(path []string) []string {
	path = slices.Clone(path)
	for i, l := range path {
		if u, err := strconv.Unquote(l); err == nil {
			path[i] = u
		}
	}
	return path
}

// builtinArgument reports whether an error path is an index into a
// builtin's argument: a spec's paths start with a field name.
func builtinArgument(path []string) bool {
	if len(path) == 0 {
		return false
	}
	_, err := strconv.Atoi(path[0])
	return err == nil
}

// splitLayerPath splits a value path into the layer it belongs to
// (model.layers.N or model.nodes.NAME) and the rest.
func splitLayerPath(path []string) (layer, rest []string) {
	if len(path) >= 3 && path[0] == "model" && (path[1] == "layers" || path[1] == "nodes") {
		return path[:3], path[3:]
	}
	return nil, path
}

// layerName is the name of the layer at path, falling back to its position
// in the list when the name itself is in error.
func layerName(layerPath []string, v *cue.Value) string {
	if layerPath[1] == "nodes" {
		return layerPath[2]
	}
	if v != nil {
		if s, err := v.LookupPath(cuePath(append(slices.Clone(layerPath), "name"))).String(); err == nil {
			return s
		}
	}
	return "#" + layerPath[2]
}

// layerOp is the op of the layer at path, for messages.
func layerOp(layerPath []string, v *cue.Value) string {
	if v != nil {
		if s, err := v.LookupPath(cuePath(append(slices.Clone(layerPath), "op"))).String(); err == nil {
			return s
		}
	}
	return "these"
}

// cuePath builds a cue.Path from labels, list indices included.
func cuePath(labels []string) cue.Path {
	sels := make([]cue.Selector, len(labels))
	for i, l := range labels {
		if n, err := strconv.Atoi(l); err == nil {
			sels[i] = cue.Index(n)
		} else {
			sels[i] = cue.Str(l)
		}
	}
	return cue.MakePath(sels...)
}

// visibleField joins the user-visible labels of a path ("training.epochs"),
// stopping at the first hidden or definition label.
func visibleField(path []string) string {
	var parts []string
	for _, l := range path {
		if strings.HasPrefix(l, "_") || strings.HasPrefix(l, "#") {
			break
		}
		parts = append(parts, l)
	}
	return strings.Join(parts, ".")
}

// isComputedField reports whether a layer field is computed by the schema
// rather than written by the user.
func isComputedField(field string) bool {
	first, _, _ := strings.Cut(field, ".")
	switch first {
	case "in", "inShapes", "out", "output", "name", "inputs":
		return true
	}
	return strings.HasPrefix(field, "model.layers") || strings.HasPrefix(field, "model.nodes") || field == "model.output"
}

func orValue(field string) string {
	if field == "" {
		return "the value"
	}
	return field
}
