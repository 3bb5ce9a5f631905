package spec

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// FuzzLoad feeds mutated specs through loading and validation. Whatever the
// input, Load must return either a Model that keeps the planner's
// conventions or positioned Errors with messages, and never panic (a panic
// inside CUE comes back as an "internal error", which counts as a failure
// here). Seeds are every valid and invalid spec; crashers found are kept in
// testdata/fuzz/FuzzLoad as regression inputs.
func FuzzLoad(f *testing.F) {
	for _, pattern := range []string{"../testdata/specs/valid/*.cue", "../testdata/specs/invalid/*.cue", "../models/*.cue"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	old := EvalTimeout
	EvalTimeout = 5 * time.Second
	f.Cleanup(func() { EvalTimeout = old })
	name := filepath.Join(f.TempDir(), "fuzz.cue")
	f.Fuzz(func(t *testing.T, src []byte) {
		m, err := LoadBytes(name, src)
		if err == nil {
			if len(m.Nodes) < 2 || m.Nodes[0].Op != OpInput || m.Node(m.Output) == nil {
				t.Fatalf("accepted a model without input or output: %+v", m)
			}
			if err := floatsHeld(reflect.ValueOf(m).Elem(), "model"); err != nil {
				t.Fatalf("accepted %v", err)
			}
			for _, n := range m.Nodes {
				for _, d := range n.OutShape {
					if d < 1 {
						t.Fatalf("accepted node %s with output shape %v", n.Name, n.OutShape)
					}
				}
			}
			return
		}
		var es Errors
		if !errors.As(err, &es) || len(es) == 0 {
			t.Fatalf("error %v is not a non-empty Errors", err)
		}
		for _, e := range es {
			if strings.Contains(e.Message, "internal error") {
				t.Fatalf("CUE panicked: %s", e.Message)
			}
			if strings.TrimSpace(e.Message) == "" || e.Pos.File != name {
				t.Fatalf("error without message or position: %+v", e)
			}
		}
	})
}

// floatsHeld checks that every float64 of an accepted model is a number a
// float32 holds (see checkNumbers): finite, at most float32's largest, 0
// or at least its smallest normal, and, for the fields bounded below 1,
// below 1 once rounded.
func floatsHeld(v reflect.Value, path string) error {
	switch v.Kind() {
	case reflect.Float64:
		x := v.Float()
		f := float32(x)
		name := path[strings.LastIndex(path, ".")+1:]
		if math.IsInf(float64(f), 0) || math.IsNaN(x) || (x != 0 && math.Abs(x) < smallestNormal32) || (belowOne[lowerFirst(name)] && !strings.HasPrefix(path, "model.Nodes") && f >= 1) || (name == "Rate" && f >= 1) {
			return fmt.Errorf("%s = %v, which a float32 does not hold", path, x)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				if err := floatsHeld(v.Field(i), path+"."+v.Type().Field(i).Name); err != nil {
					return err
				}
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			if err := floatsHeld(v.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Pointer:
		if !v.IsNil() {
			return floatsHeld(v.Elem(), path)
		}
	}
	return nil
}

// lowerFirst is a Go field name as the spec spells it (Rate: rate).
func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}
