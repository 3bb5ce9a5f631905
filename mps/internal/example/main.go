// Command example runs one training-like step through mps.Engine: a GEMM
// and a kernel dispatch in one command buffer. It is what the
// cross-compilation test builds for darwin/arm64, and, with -fake, it runs
// the same host code on the recording fake on any OS.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/mlbuild/mlbuild/mps"
	"github.com/mlbuild/mlbuild/mps/fakemetal"
)

const source = `#include <metal_stdlib>
using namespace metal;
kernel void add_bias(device float *y [[buffer(0)]], device const float *b [[buffer(1)]], constant uint &n [[buffer(2)]], uint i [[thread_position_in_grid]]) {
    y[i] += b[i % n];
}
`

const n = 4 // y = x·W + b with x, W, y n×n and b of n

func main() {
	fake := flag.Bool("fake", false, "run on mps/fakemetal instead of the GPU")
	flag.Parse()
	if err := run(*fake); err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		if errors.Is(err, mps.ErrNoDevice) {
			os.Exit(3)
		}
		os.Exit(1)
	}
}

func run(useFake bool) error {
	var (
		e   *mps.Engine
		err error
		f   *fakemetal.Fake
	)
	if useFake {
		f = fakemetal.New(fakemetal.Kernel{Name: "add_bias", BufferBytes: []int{4 * n * n, 4 * n}, ConstantBytes: 4})
		e, err = mps.NewEngine(f)
	} else {
		e, err = mps.Open()
	}
	if err != nil {
		return err
	}
	fmt.Println("device:", e.DeviceName())
	if err := e.LoadLibrary(source); err != nil {
		return err
	}
	x, err := e.NewBuffer("x", 4*n*n)
	if err != nil {
		return err
	}
	w, err := e.NewBuffer("w", 4*n*n)
	if err != nil {
		return err
	}
	yb, err := e.NewBuffer("y and b", 4*(n*n+n))
	if err != nil {
		return err
	}
	for i := range n {
		x.Float32s()[i*n+i] = 1 // identity
		yb.Float32s()[n*n+i] = float32(i)
	}
	for i := range w.Float32s() {
		w.Float32s()[i] = float32(i)
	}
	s, err := e.Begin("example step")
	if err != nil {
		return err
	}
	if err := s.Gemm(mps.GemmSpec{M: n, N: n, K: n, Alpha: 1, A: mps.MatrixOperand{Buffer: x}, B: mps.MatrixOperand{Buffer: w}, C: mps.MatrixOperand{Buffer: yb}}); err != nil {
		return err
	}
	if err := s.Dispatch("add_bias", []mps.Binding{{Buffer: yb}, {Buffer: yb, Offset: 4 * n * n}}, mps.Size{Width: n * n, Height: 1, Depth: 1}, mps.Size{Width: 32, Height: 1, Depth: 1}, []byte{n, 0, 0, 0}); err != nil {
		return err
	}
	if err := s.Commit(); err != nil {
		return err
	}
	if err := s.Wait(); err != nil {
		return err
	}
	fmt.Println("y[0:4]:", yb.Float32s()[:n])
	if err := e.Close(); err != nil {
		return err
	}
	if f != nil {
		if err := f.Check(); err != nil {
			return err
		}
		fmt.Println("fake: protocol ok")
	}
	return nil
}
