package cuda

import (
	"regexp"
	"strings"
)

// NVRTC compiles one program on one thread, and a large model's kernels
// (models/gpt.cue's bf16 program: 168 kernels, 2.4 MB of source) take it
// tens of seconds at a cold start. splitSource cuts such a source into
// parts that NVRTC compiles side by side, each loaded as a module of its
// own (Function finds a kernel in any of them).
//
// The source must be as emit/gpu prints a library: shared definitions
// first (the dialect's header, tile and fragment helpers: __device__
// functions and macros, no kernel), then kernels that call no other
// kernel, each opened by its comment lines and its `extern "C"
// __global__` line. A part is the shared definitions followed by a run of
// whole kernels, in the source's order; the parts' runs laid end to end
// are the source's kernels.

// kernelLine matches the first line of a kernel's declaration.
var kernelLine = regexp.MustCompile(`(?m)^extern "C" __global__ `)

// partBytes is the kernel source a part should hold: the count of parts
// depends on the source alone (never on the machine), so the kernel cache
// finds the same parts on every machine and at every thread count.
// models/gpt.cue's bf16 program makes 7 parts, models/mnist.cue's 2; a
// part costs NVRTC (and the fake's g++) its start-up and the shared
// definitions again, so small programs stay whole.
var partBytes = 384 << 10 // a variable for the tests

// maxParts caps the parts of one source: each repeats the shared
// definitions, and more parts than cores buy nothing.
const maxParts = 16

// splitSource returns source's parts: one part, source itself, when it
// holds fewer than two kernels or less than two parts' worth of them.
func splitSource(source string) []string {
	starts := kernelStarts(source)
	if len(starts) < 2 {
		return []string{source}
	}
	shared, body := source[:starts[0]], len(source)-starts[0]
	parts := min((body+partBytes-1)/partBytes, maxParts, len(starts))
	if parts < 2 {
		return []string{source}
	}
	// the m-th cut is the kernel start nearest to m parts' share of the
	// kernels; a kernel larger than a share leaves fewer parts
	var out []string
	from, k := starts[0], 0
	for m := 1; m < parts; m++ {
		ideal := starts[0] + m*body/parts
		for k+1 < len(starts) && abs(starts[k+1]-ideal) <= abs(starts[k]-ideal) {
			k++
		}
		if starts[k] > from {
			out = append(out, shared+source[from:starts[k]])
			from = starts[k]
		}
	}
	return append(out, shared+source[from:])
}

func abs(n int) int { return max(n, -n) }

// kernelStarts returns where each kernel begins: its first comment line
// just above the declaration, else the declaration.
func kernelStarts(source string) []int {
	var starts []int
	for _, loc := range kernelLine.FindAllStringIndex(source, -1) {
		start := loc[0]
		for start > 0 {
			prev := strings.LastIndexByte(source[:start-1], '\n') + 1
			if !strings.HasPrefix(source[prev:start], "//") {
				break
			}
			start = prev
		}
		if len(starts) > 0 && start < starts[len(starts)-1] {
			start = loc[0] // comments reaching back into the kernel before: keep them with it
		}
		starts = append(starts, start)
	}
	return starts
}
