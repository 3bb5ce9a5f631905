package planner

import "fmt"

// castInput gives a bf16 plan's library convolutions that read the
// model's input a copy of it they can read: the input is float32 and
// NCHW (the host writes it so, or the device-resident gather), and a
// library convolution multiplies bfloat16 only on bfloat16 tensors
// (store_bf16.go), which the plan then keeps channels last where the
// Target's library is faster so (store_channels_last.go). A cast step at
// the head of the forward pass (after any fold steps) writes the copy,
// which storeBF16 may then store in bfloat16 and storeChannelsLast
// channels last: CIFAR ResNet-18's stem runs as cuDNN calls instead of
// the direct kernels (emit's cudaLibraryConvs).
//
// Before: chooseMethods and choosePrecisions have run; no buffer has an
// element type but the twins. After, for a bf16 plan and a Target whose
// BF16Storage has a Library and takes KCast among its Kernels: every
// conv2d and conv2d_bwd step of that method in precision bf16 reads, as
// its x, a new activation "<input>.cast" of the input's shape instead of
// the input, which one KCast step, placed right after the fold steps,
// writes from the input. Other plans are unchanged.
func castInput(p *Plan, t Target) {
	s := t.BF16Storage
	if s == nil || s.Library == "" || !s.Kernels[KCast] || p.Precision != PrecisionBF16 || p.Input == NoBuf {
		return
	}
	cast := NoBuf
	for _, st := range p.allSteps() {
		if !s.bf16Library(st) || st.In[0] != p.Input {
			continue
		}
		if cast == NoBuf {
			cast = p.addBuffer(p.freeName(p.Buffers[p.Input].Name+".cast"), KindActivation, p.shapeOf(p.Input))
		}
		st.In[0] = cast
	}
	if cast == NoBuf {
		return
	}
	n := p.FoldSteps()
	step := Step{Kernel: KCast, Layer: p.Buffers[p.Input].Name, In: []BufID{p.Input}, Out: []BufID{cast}}
	p.Forward = append(p.Forward[:n], append(Phase{step}, p.Forward[n:]...)...)
	p.Fusions = append(p.Fusions, fmt.Sprintf("%s -> cast (a copy of the input for the library convolutions that read it, which may store it in bfloat16)", p.Buffers[p.Input].Name))
}
