package cpu

// AttendCached is the causal attention of one new position p over the
// positions 0..p with a KV cache (a language model's decode step): it
// writes k and v ([heads·hd], the new position's key and value rows) at
// row p of kc and vc ([T, heads·hd]), then for each head h
//
//	s_j = scale·q_h·kc[j]_h for j ≤ p,  y_h = Σ_j softmax(s)_j·vc[j]_h
//
// which is row p of softmax_causal(scale·Q·Kᵀ)·V per head, computed with
// one position's work instead of T's. scores is scratch of at least p+1;
// with heads·(p+1) or more the heads run on the threads (Threads), each
// with its own part of it, and y is the same bit for bit for any number of
// threads, as each head's sums are one thread's in one order.
func AttendCached(q, k, v, y, kc, vc, scores []float32, p, heads, hd int, scale float32) {
	w := heads * hd
	copy(kc[p*w:(p+1)*w], k[:w])
	copy(vc[p*w:(p+1)*w], v[:w])
	n := p + 1
	if len(scores) < heads*n || Threads() == 1 { // no closure on one thread
		for h := range heads {
			attendHead(q, y, kc, vc, scores[:n], h, hd, w, scale)
		}
		return
	}
	if t, ok := teamLock(); ok {
		// a head reads n cached keys and n values of hd floats
		if parts := teamParts(heads, 8*n*hd, t.size); parts > 1 {
			t.attend = attendJob{q: q, y: y, kc: kc, vc: vc, scores: scores, heads: heads, hd: hd, n: n, scale: scale}
			t.run(&t.attend, parts)
			return
		}
		t.alone()
		for h := range heads {
			attendHead(q, y, kc, vc, scores[:n], h, hd, w, scale)
		}
		return
	}
	if heads*n*hd < 8<<10 { // under ~16k multiply-adds: not worth a split
		for h := range heads {
			attendHead(q, y, kc, vc, scores[:n], h, hd, w, scale)
		}
		return
	}
	// a piece of at least about 16k multiply-adds (keys and values)
	ParallelFor(heads, max(1, (8<<10)/(n*hd)), func(lo, hi int) {
		for h := lo; h < hi; h++ {
			attendHead(q, y, kc, vc, scores[h*n:(h+1)*n], h, hd, w, scale)
		}
	})
}

// attendHead is AttendCached's work for head h over the len(s) cached
// positions, s its scratch; w is a cache row's length.
func attendHead(q, y, kc, vc, s []float32, h, hd, w int, scale float32) {
	dotRows(q[h*hd:(h+1)*hd], kc[h*hd:], w, s)
	for j := range s {
		s[j] *= scale
	}
	// the full forward pass's softmax: e^x in float32 vector registers
	// (exp.go), summed in float64
	softmaxRow(s, s)
	yh := y[h*hd : (h+1)*hd]
	vh := vc[h*hd:]
	d := weightedRowsVector(yh, s, vh, w)
	weightedRowsGo(yh[d:], s, vh[d:], w)
}

// weightedRowsGo writes y[d] = Σ_j a[j]·v[j·ldv+d], summed from zero in
// the order of j.
func weightedRowsGo(y, a, v []float32, ldv int) {
	if len(y) == 0 {
		return
	}
	clear(y)
	for j, aj := range a {
		vj := v[j*ldv : j*ldv+len(y)]
		for d, x := range vj {
			y[d] += aj * x
		}
	}
}
