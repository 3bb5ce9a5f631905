package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"sort"

	"github.com/mlbuild/mlbuild/planner"
	"github.com/mlbuild/mlbuild/rt/safetensors"
)

// layoutAlign is the alignment of the data section in a file laid out as
// the state arena: a cache line, so that a program that maps the weights
// as its arena reads them as it reads a Go allocation's.
const layoutAlign = 64

// maxLayoutPad bounds the gap bytes a file laid out as the arena may hold
// (pads): a sixteenth of the weights, and at least 64 KiB. The params of
// every model lie together at the start of the arena, Align apart; a plan
// that put them otherwise is embedded as it came.
func maxLayoutPad(weights int) int { return max(64<<10, weights/16) }

// arenaLayout rewrites f (a weights file whose tensors are all F32, read
// with ReadBytes) as the same weights laid out as the plan's state arena:
// the tensors in the order of their offsets in the arena, the data section
// starting at a multiple of layoutAlign, each tensor's bytes at 4 × its
// buffer's offset from that start, and the gaps between them filled with
// pads (safetensors.PadPrefix). A program whose embedded weights are laid
// out so maps them as its state arena (copy on write) instead of copying
// them in. ok is false, and f is embedded as it came, when a tensor is not
// F32 or the params are not together at the start of the arena.
func arenaLayout(f *safetensors.File, train *planner.Plan) (laid []byte, ok bool) {
	type placed struct {
		t      *safetensors.Tensor
		offset int // bytes from the data section's start
	}
	var ps []placed
	weights := 0
	for _, p := range train.Params {
		b := train.Buffers[p.Buf]
		t, found := f.Tensor(p.Name)
		if !found || t.DType != "F32" || b.Arena != "state" {
			return nil, false
		}
		ps = append(ps, placed{t, 4 * b.Offset})
		weights += 4 * len(t.Data)
	}
	if len(ps) == 0 || len(ps) != len(f.Tensors) {
		return nil, false
	}
	sort.Slice(ps, func(a, b int) bool { return ps[a].offset < ps[b].offset })
	header := map[string]any{}
	if len(f.Metadata) > 0 {
		header["__metadata__"] = f.Metadata
	}
	entry := func(name, dtype string, shape []int, begin, end int) {
		header[name] = map[string]any{"dtype": dtype, "shape": shape, "data_offsets": []int{begin, end}}
	}
	pos, pads := 0, 0
	for _, p := range ps {
		if p.offset < pos {
			return nil, false // overlapping buffers: not an arena of params
		}
		if gap := p.offset - pos; gap > 0 {
			entry(fmt.Sprintf("%s%d", safetensors.PadPrefix, pads), "U8", []int{gap}, pos, p.offset)
			pads += gap
		}
		pos = p.offset + 4*len(p.t.Data)
		entry(p.t.Name, "F32", p.t.Shape, p.offset, pos)
	}
	if pads > maxLayoutPad(weights) {
		return nil, false
	}
	js, err := json.Marshal(header)
	if err != nil {
		return nil, false
	}
	// Spaces after the JSON (the format's own padding) put the data at a
	// multiple of layoutAlign.
	n := len(js) + (layoutAlign-(8+len(js))%layoutAlign)%layoutAlign
	var out bytes.Buffer
	out.Grow(8 + n + pos)
	binary.Write(&out, binary.LittleEndian, uint64(n))
	out.Write(js)
	out.Write(bytes.Repeat([]byte{' '}, n-len(js)))
	data := make([]byte, pos)
	for _, p := range ps {
		for i, v := range p.t.Data {
			binary.LittleEndian.PutUint32(data[p.offset+4*i:], math.Float32bits(v))
		}
	}
	out.Write(data)
	return out.Bytes(), true
}
