package planner

import (
	"fmt"

	"github.com/mlbuild/mlbuild/spec"
)

// chooseMethods asks the target, for every conv2d and conv2d_bwd step, how
// the backend computes it, and records the answer in the plan: the method
// in Attr.Method (so that the emitter calls that kernel, `mlbuild plan`
// shows it and the cache key covers it) and the method's scratch as the
// step's workspace operand.
//
// Before: the plan is lowered and, when training, differentiated (whether
// a conv2d_bwd computes dx is final); no convolution step has a Method or
// a workspace (Out[1] of conv2d and In[4] of conv2d_bwd are NoBuf).
// After: every convolution step has the target's Method; a step whose
// method needs scratch has a workspace, a new scratch buffer of that many
// float32s appended to Buffers (LAYER.cols forward, LAYER.bwd_cols
// backward), except a backward whose choice SharesForward and whose
// layer's forward workspace is large enough: it takes that workspace and
// Attr.KeptCols. A method that needs none leaves the operand NoBuf, so no
// empty buffer reaches the program. Where the target has library
// convolutions (Target.ConvLibrary), each choice passes through it with
// the plan's precision (precision, the spec's; "" is f32), and
// Plan.Methods says, for `mlbuild plan`, how many steps the library runs
// and why, and how many it does not run and why not. Nothing else changed.
func chooseMethods(p *Plan, t Target, precision string) error {
	if precision == "" {
		precision = PrecisionF32
	}
	var libLines []string // in the order first met
	libCount := map[string]int{}
	taken := map[string]bool{}
	for _, b := range p.Buffers {
		taken[b.Name] = true
	}
	name := func(base string) string {
		n := base
		for i := 2; taken[n]; i++ {
			n = fmt.Sprintf("%s.%d", base, i)
		}
		taken[n] = true
		return n
	}
	fwdCols := map[string]BufID{} // layer -> its forward step's workspace
	for _, ph := range []Phase{p.Forward, p.Backward} {
		for i := range ph {
			s := &ph[i]
			var pass ConvPass
			var slot *BufID
			var suffix string
			switch s.Kernel {
			case KConv2D:
				pass, slot, suffix = ConvForward, &s.Out[1], ".cols"
			case KConv2DBwd:
				pass, slot, suffix = ConvBackward, &s.In[4], ".bwd_cols"
				if s.Out[0] == NoBuf {
					pass = ConvBackwardNoDx
				}
			default:
				continue
			}
			c := t.Conv(*s.Attr.Conv, pass)
			if t.ConvLibrary != nil {
				var why LibraryWhy
				c, why = t.ConvLibrary(*s.Attr.Conv, c, precision)
				if why.Reason != "" {
					line := c.Method + ", " + why.Reason
					if !why.Taken {
						line = c.Method + ", not the library's: " + why.Reason
					}
					if libCount[line] == 0 {
						libLines = append(libLines, line)
					}
					libCount[line]++
				}
			}
			if c.Method == "" || c.Scratch < 0 {
				return &spec.Error{Layer: s.Layer, Message: fmt.Sprintf("the %s backend gives its %s convolution the method %q and %d float32s of scratch (a bug in mlbuild)",
					t.Name, pass, c.Method, c.Scratch)}
			}
			s.Attr.Method = c.Method
			if c.Scratch <= 0 {
				continue
			}
			if f, ok := fwdCols[s.Layer]; ok && pass != ConvForward && c.SharesForward && p.Buffers[f].Size >= c.Scratch {
				*slot, s.Attr.KeptCols = f, true
				continue
			}
			*slot = p.addBuffer(name(s.Layer+suffix), KindScratch, []int{c.Scratch})
			if pass == ConvForward {
				fwdCols[s.Layer] = *slot
			}
		}
	}
	for _, l := range libLines {
		unit := "steps"
		if libCount[l] == 1 {
			unit = "step"
		}
		p.Methods = append(p.Methods, fmt.Sprintf("%d convolution %s: %s", libCount[l], unit, l))
	}
	return nil
}
