package cuda

import (
	"fmt"
	"strings"
	"testing"
)

// librarySource prints a source as emit/gpu does: shared definitions,
// then n kernels of about size bytes, each after a blank line and its two
// comment lines.
func librarySource(shared string, sizes []int) string {
	var b strings.Builder
	b.WriteString(shared)
	for i, size := range sizes {
		k := fmt.Sprintf("\n// kernel %d\n// threadgroups 1 x 32 threads\nextern \"C\" __global__ void k%03d(float* __restrict__ x) {\n", i, i)
		for len(k) < size {
			k += fmt.Sprintf("    x[%d] += 1.0f;\n", len(k)%97)
		}
		k += "}\n"
		b.WriteString(k)
	}
	return b.String()
}

func TestSplitSourceKeepsEveryKernelOnce(t *testing.T) {
	defer func(n int) { partBytes = n }(partBytes)
	partBytes = 1000
	shared := "// CUDA C++; compile with nvcc or NVRTC.\n#define MLB_ONE 1.0f\n__device__ float mlb_twice(float v) { return 2 * v; }\n"
	for _, tc := range []struct {
		name      string
		sizes     []int
		wantParts int
	}{
		{"one kernel", []int{5000}, 1},
		{"less than two parts", []int{300, 400, 200}, 1},
		{"even", []int{450, 450, 450, 450, 450, 450}, 3},
		{"one large kernel", []int{200, 200, 4000, 200, 200}, 3},
		{"more kernels than parts allowed", make([]int, 40), 0},
		{"capped", repeat(1000, 40), maxParts},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := range tc.sizes {
				tc.sizes[i] = max(tc.sizes[i], 100)
			}
			src := librarySource(shared, tc.sizes)
			parts := splitSource(src)
			if tc.wantParts > 0 && len(parts) != tc.wantParts {
				t.Errorf("%d parts, want %d", len(parts), tc.wantParts)
			}
			// the shared definitions end where the first kernel's
			// comments start
			shared := src[:strings.Index(src, "// kernel 0\n")]
			var joined strings.Builder
			for i, p := range parts {
				rest, ok := strings.CutPrefix(p, shared)
				if !ok {
					t.Fatalf("part %d does not open with the shared definitions:\n%.200s", i, p)
				}
				if !kernelLine.MatchString(rest) {
					t.Errorf("part %d holds no kernel", i)
				}
				if strings.Contains(rest, "__device__") {
					t.Errorf("part %d holds shared definitions after its start", i)
				}
				joined.WriteString(rest)
			}
			if joined.String() != src[len(shared):] {
				t.Errorf("the parts' kernels laid end to end differ from the source's")
			}
			if len(parts) == 1 && parts[0] != src {
				t.Errorf("one part, but not the source itself")
			}
		})
	}
}

func repeat(v, n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = v
	}
	return s
}
