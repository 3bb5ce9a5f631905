package gpu

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// tileProductKernel is one warp multiplying a 16×8 matrix a by an 8×16
// matrix b (both row-major in memory) with every tile statement and
// every layout: a and b are staged as they are and transposed, so that
// A tiles load row- and column-major and B tiles too; acc sums the four
// products of the layouts (4·a·b) and is stored column-major, single =
// a·b row-major, and the kernel copies both out row-major.
func tileProductKernel() *Kernel {
	e := vr("e")
	body := []Stmt{
		Shared{"sa", 16 * 8}, Shared{"sat", 8 * 16}, Shared{"sb", 8 * 16}, Shared{"sbt", 16 * 8}, Shared{"sc", 16 * 16}, Shared{"sd", 16 * 16},
		For{"e", lidE, i32(128), i32(32), []Stmt{
			store("sa", e, load("a", e)),
			store("sat", add(mul(rem(e, i32(8)), i32(16)), div(e, i32(8))), load("a", e)),
			store("sb", e, load("b", e)),
			store("sbt", add(mul(rem(e, i32(16)), i32(8)), div(e, i32(16))), load("b", e)),
		}},
		Barrier{},
		TileDecl{"ar", TileA, false}, TileDecl{"ac", TileA, true}, TileDecl{"br", TileB, false}, TileDecl{"bc", TileB, true},
		TileDecl{"acc", TileAcc, true}, TileDecl{"single", TileAcc, false},
		TileLoad{"ar", "sa", i32(0), 8}, TileLoad{"ac", "sat", i32(0), 16},
		TileLoad{"br", "sb", i32(0), 16}, TileLoad{"bc", "sbt", i32(0), 8},
		TileZero{"acc"}, TileZero{"single"},
		TileMMA{"acc", "ar", "br"}, TileMMA{"acc", "ar", "bc"}, TileMMA{"acc", "ac", "br"}, TileMMA{"acc", "ac", "bc"},
		TileMMA{"single", "ar", "bc"},
		TileStore{"acc", "sc", i32(0), 16}, TileStore{"single", "sd", i32(0), 16},
		Barrier{},
		For{"e", lidE, i32(256), i32(32), []Stmt{
			store("four", e, load("sc", add(mul(rem(e, i32(16)), i32(16)), div(e, i32(16))))),
			store("one", e, load("sd", e)),
		}},
	}
	return &Kernel{Name: "tile_product", Doc: "four = 4·a·b and one = a·b on tensor tiles, every layout", Threadgroup: 32, Groups: 1,
		Params: []Param{in("a", 128), in("b", 128), out("four", 256), out("one", 256)}, Body: body}
}

// TestTileProductOnCPU runs tileProductKernel on the CPU, the CUDA
// dialect's tiles emulated by the shim, against a·b of the TF32-rounded
// operands: every layout of every tile statement reads and writes the
// elements it should, and the operands are rounded (the exact product
// is out of reach).
func TestTileProductOnCPU(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 16))
	a, b := randVec(r, 128, -2, 2), randVec(r, 128, -2, 2)
	one, four, exact := make([]float32, 256), make([]float32, 256), make([]float32, 256)
	for i := range 16 {
		for j := range 16 {
			var s, x float32
			for k := range 8 {
				s += tf32Round(a[i*8+k]) * tf32Round(b[k*16+j])
				x += a[i*8+k] * b[k*16+j]
			}
			one[i*16+j], four[i*16+j], exact[i*16+j] = s, 4*s, x
		}
	}
	cases := []gpuCase{{name: "tiles", k: tileProductKernel(), tol: 1e-5,
		in: [][]float32{a, b, zeros(256), zeros(256)}, want: map[int][]float32{2: four, 3: one}}}
	res := runCases(t, CUDA, cases)
	checkCases(t, CUDA, cases, res)
	worst := 0.0
	for i := range exact {
		worst = max(worst, float64(abs32(res[0][3][i]-exact[i])))
	}
	if worst <= 1e-5*8 {
		t.Errorf("the tile product is within %g of the exact product: the emulation does not round to TF32", worst)
	}
}

func abs32(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}

// TestTileProductCUDAText: the CUDA text of tileProductKernel, with the
// tile header (the PTX wmma of tiles_cuda.go), is the golden
// testdata/golden/tile_product.cu; Metal, whose dialect names no tiles,
// refuses to print it; and a kernel without tiles prints no tile header
// and its shared arrays as before.
func TestTileProductCUDAText(t *testing.T) {
	src, err := Source(CUDA, []*Kernel{Rewrite(tileProductKernel(), CUDA)})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "tile_product.cu", src)
	if _, err := Source(Metal, []*Kernel{Rewrite(tileProductKernel(), Metal)}); err == nil || !strings.Contains(err.Error(), "no matrix tiles") {
		t.Errorf("Metal printed a tile kernel: error %v", err)
	}
	plain := &Kernel{Name: "plain", Threadgroup: 32, Groups: 1, Params: []Param{out("x", 32)},
		Body: []Stmt{Shared{"s", 32}, store("s", lidE, flt(1)), Barrier{}, store("x", lidE, load("s", lidE))}}
	src, err = Source(CUDA, []*Kernel{plain})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(src, "wmma") || !strings.Contains(src, "__shared__ __align__(16) float s[32];") {
		t.Errorf("a kernel without tiles printed as\n%s", src)
	}
}

// TestTileStatementsChecked: the printer refuses a tile used before its
// declaration, in a role it was not declared with, or declared twice
// differently.
func TestTileStatementsChecked(t *testing.T) {
	for _, c := range []struct {
		name string
		body []Stmt
		want string
	}{
		{"undeclared", []Stmt{TileZero{"x"}}, "before its declaration"},
		{"role", []Stmt{TileDecl{"x", TileA, false}, TileZero{"x"}}, "of role"},
		{"redeclared", []Stmt{TileDecl{"x", TileA, false}, TileDecl{"x", TileA, true}}, "declared twice"},
		{"mma roles", []Stmt{TileDecl{"x", TileAcc, false}, TileDecl{"y", TileB, false}, TileMMA{"x", "y", "y"}}, "of role"},
	} {
		k := &Kernel{Name: "bad", Threadgroup: 32, Groups: 1, Params: []Param{out("x", 1)}, Body: c.body}
		if _, err := Source(CUDA, []*Kernel{k}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.want)
		}
	}
}
