package cpu

import "fmt"

// The grouped method: the forward pass of a convolution of a few input
// channels a group (RegNet's and ResNeXt's 3×3 layers, 8 channels a
// group in regnet_y_400mf) runs as the depthwise method does, each
// output channel one depthwise filter of cg·KH·KW taps over its group's
// cg input planes laid end to end in phase planes: tap (ci, kh, kw) is
// the depthwise tap (kh, kw) shifted by ci planes. im2col + GEMM
// gathered cg·KH·KW rows of columns for a product of only C/G output
// rows (8 rows: two thirds of a 12-row tile); here each output row is
// written once, straight from the planes, bias and ReLU in registers.
// The backward passes stay on im2col (the planner chooses this method
// for the forward pass only).
//
// A stem (one group of at most groupedStemChannels input channels: the
// RGB image into a network's first 3×3 stride-2 layer) runs the same
// way, each output channel one filter of C·KH·KW taps: im2col gathered
// 27 rows of columns a value at a time for a product of only 27 steps
// (11% of mobilenet_v2's batch-1 inference on one thread). With fewer
// images and groups than threads, a task is a share of a group's output
// channels, each task splitting its group's planes for itself. With
// AVX-512 the rows of several output channels of a group are computed
// together, each tap's input vectors loaded once for all of them
// (depthwiseKernels.filterRows), where the depthwise row kernel loaded
// them once a channel.

// groupedMaxChannels is the most input channels a group the grouped
// method takes: its phase planes, cg of them a task, stay in L2 (8 of
// 58² floats for regnet's 56² layer at stride 2: 108 KiB).
const groupedMaxChannels = 16

// groupedStemChannels is the most input channels of a one-group
// convolution the grouped method takes.
const groupedStemChannels = 4

// groupedOK reports whether normalised g suits the grouped method: more
// than one group, at most groupedMaxChannels input channels in each, and
// not a depthwise convolution (which has a method of its own); or one
// group of at most groupedStemChannels input channels.
func groupedOK(g Conv) bool {
	if g.Groups == 1 {
		return g.C >= 1 && g.C <= groupedStemChannels
	}
	return g.Groups > 1 && g.C/g.Groups <= groupedMaxChannels && !depthwiseOK(g)
}

// Conv2DGroupedFwd computes y = act(conv(x, w) + b) for a grouped g
// (groupedOK) at any stride, padding and dilation: x [N,C,H,W], w
// [OC,C/G,KH,KW], b [OC] or nil, y [N,OC,OH,OW]. It panics on any other
// geometry (the planner chooses it only for these).
func Conv2DGroupedFwd(x, w, b, y []float32, g Conv, act Act, alpha float32) {
	g = g.norm()
	if !groupedOK(g) {
		panic(fmt.Sprintf("cpu.Conv2DGroupedFwd: %d groups of %d input channels; the grouped method needs 2 groups or more of at most %d input channels, and not one input and one output channel a group, or one group of at most %d input channels",
			g.Groups, g.C/max(g.Groups, 1), groupedMaxChannels, groupedStemChannels))
	}
	p := activeGemmPath.Load()
	k, store := depthwiseFor(p), convDirectFor(p)
	G, cg, ocg := g.Groups, g.C/g.Groups, g.OC/g.Groups
	kk, hw, ohw := g.KH*g.KW, g.H*g.W, g.OH*g.OW
	taps := cg * kk
	lead := convWorkers.Get()
	lead.offs = growInts(lead.offs, taps)
	offs := lead.offs[:taps]
	d := newDepthwiseGeom(g, k, offs[:kk])
	// Channel ci's phase planes start ci·plane floats in; the reads of
	// the last channel's taps reach d.xlen past its start.
	plane := d.phases * d.planeLen
	for ci := cg - 1; ci > 0; ci-- {
		for t := range kk {
			offs[ci*kk+t] = ci*plane + offs[t]
		}
	}
	xlen := (cg-1)*plane + d.xlen
	byRows := k.rows != nil && g.OW >= rowsMinOW
	// filters output channels of a group at a time share each tap's
	// loads of the input rows (depthwiseKernels.filterRows).
	filters, relu := 1, rowsRelu(act)
	if byRows && k.filterRows != nil && relu >= 0 {
		filters = max(1, k.maxFilters(g.OW))
	}
	// parts tasks share each group's output channels where images and
	// groups are fewer than threads.
	parts := 1
	if g.N*G < Threads() {
		parts = min(ocg, (Threads()+g.N*G-1)/(g.N*G))
	}
	workers := convParallel(g.N*G*parts, func(cw *convWorker) {
		cw.panel = grow(cw.panel, xlen)
		clear(cw.panel) // the padding, which split leaves as it is
		if !byRows {
			cw.cols = grow(cw.cols, d.n)
		}
		cw.rows = grow(cw.rows, taps*filters)
		cw.db = grow(cw.db, filters)
	}, func(cw *convWorker, task int) {
		part := task % parts
		n, gi := task/parts/G, task/parts%G
		for ci := range cg {
			c := n*g.C + gi*cg + ci
			d.split(x[c*hw:(c+1)*hw], cw.panel[ci*plane:], g)
		}
		o0, o1 := part*ocg/parts, (part+1)*ocg/parts
		for o := o0; filters > 1 && o < o1; {
			r := min(filters, o1-o)
			oc := gi*ocg + o
			wi, bb := cw.rows[:taps*r], cw.db[:r]
			for f := range r {
				for t := range taps {
					wi[t*r+f] = w[(oc+f)*taps+t]
				}
				bb[f] = 0
				if b != nil {
					bb[f] = b[oc+f]
				}
			}
			yp := y[(n*g.OC+oc)*ohw : (n*g.OC+oc+r)*ohw] // the assembly does no bounds checks
			k.filterRows(r, taps, &offs[0], &wi[0], &cw.panel[0], d.wq, &yp[0], ohw, g.OW, g.OH, &bb[0], relu)
			o += r
		}
		if filters > 1 {
			return
		}
		for o := o0; o < o1; o++ {
			oc := gi*ocg + o
			bv := float32(0)
			if b != nil {
				bv = b[oc]
			}
			d.outPlane(k, store, cw, offs, w[oc*taps:], y[(n*g.OC+oc)*ohw:(n*g.OC+oc+1)*ohw], g, bv, act, alpha, byRows)
		}
	})
	releaseConvWorkers(workers)
	convWorkers.Put(lead)
}
