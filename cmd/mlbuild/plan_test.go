package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/planner"
)

// planCLI runs `mlbuild plan args...` in-process.
func planCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(append([]string{"plan"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestPlanText(t *testing.T) {
	code, out, stderr := planCLI("../../models/mnist.cue")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"plan mnist: batch 250, training, fusion on",
		"dense1 + relu3 -> gemm (relu epilogue)",
		"softmax_xent",
		"conv2d_bwd(relu",
		"memory: state",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	_, again, _ := planCLI("../../models/mnist.cue")
	if again != out {
		t.Errorf("two runs print different plans")
	}
	code, unfused, _ := planCLI("../../models/mnist.cue", "--fusion", "off")
	if code != ExitOK || strings.Contains(unfused, "fusions (") || !strings.Contains(unfused, "forward (9 steps)") {
		t.Errorf("--fusion off: exit %d\n%s", code, unfused)
	}
}

// TestPlanPrecision: `mlbuild plan` of a bf16 spec shows each
// matrix-product step's precision, bf16 at the training batch on the CPU
// (and the CPU's im2col convolutions, its direct ones f32) and on CUDA
// (but its convolutions, tf32 through cuDNN, and the direct kernel's,
// f32), f32 at batch 1 on the CPU, on Metal and for tf32 on the
// CPU, with the reason for each step not in the plan's precision, and
// CUDA's convolution methods with the measurement that chose them (cuDNN
// in tf32 and bf16 plans, im2col and cuBLAS in f32 ones); the JSON plan
// carries the precisions too.
func TestPlanPrecision(t *testing.T) {
	const bf16 = "../../bench/models/mlp_bf16.cue"
	const resnet = "../../bench/models/resnet18_cifar_bf16.cue"
	const tf32 = "../../bench/models/resnet18_cifar_tf32.cue"
	const f32 = "../../bench/models/resnet18_cifar.cue"
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{bf16}, []string{"plan bench_mlp_bf16: batch 250, training, fusion on, precision bf16\n", "gemm(relu bf16)", "gemm_bwd(relu bf16)", "precision: 6 of 6 matrix-product steps in bf16\n"}},
		{[]string{bf16, "--mode", "infer", "--batch", "1"}, []string{"gemm(relu f32)", "precision: 0 of 3 matrix-product steps in bf16\n", "gemm dense1: f32, not bf16: 1 row, fewer than the 16 of a bf16 tile"}},
		{[]string{bf16, "--backend", "cuda"}, []string{"gemm(relu bf16)", "gemm_bwd(relu bf16)", "precision: 6 of 6 matrix-product steps in bf16\n"}},
		{[]string{bf16, "--backend", "metal"}, []string{"gemm_bwd dense1: f32, not bf16: the Metal backend's MPS matrices are float32"}},
		{[]string{resnet, "--backend", "cuda"}, []string{"  0   cast(nhwc)                          input.out ", "conv2d(k3x3 s1 p1 cudnn bf16 nhwc)", "batchnorm(relu nhwc)", "batchnorm(+ residual relu nhwc)     s1b1_bn2+s1b1_sum+s1b1_out", "batchnorm_bwd(relu nhwc)", "sgd_multi", "conv2d_bwd(k3x3 s1 p1 cudnn bf16 nhwc)", "batchnorm(nhwc)", "gemm(bf16)",
			"precision: 42 of 42 matrix-product steps in bf16\n",
			"2 convolution steps: cudnn, cuDNN's calls on the input cast to bfloat16: CIFAR ResNet-18's stem",
			"38 convolution steps: cudnn, cuDNN's calls on the bfloat16 tensors the plan stores (tf32 where one stays float32): a CIFAR ResNet-18 step 4.17 ms on an H200",
			"s1b1_bn2 + s1b1_sum -> batchnorm (the sum and relu after the normalisation, in its kernel)",
			"unary_bwd(of dy + dy2 relu from y nhwc)", "accumulate + s1b1_out -> unary_bwd (the two gradients summed where the activation's derivative is applied)",
			"bf16 storage: 90 activations and gradients in bfloat16 memory, which every step that names them reads and writes in bfloat16 (sums add in float32); 20 library convolutions multiply bfloat16 tensors, 20 of them writing dW to a bfloat16 workspace",
			// the convolutions read their weights' KRSC twins, which the
			// update writes: no filter copy in the forward's workspace
			"90 of them channels last, with KRSC filters (20 weights' KRSC bfloat16 twins, which their updates write)",
			"s4b2_conv2.weight.krsc: in KRSC order, written by its update step and the program, read by the library convolutions of s4b2_conv2"}},
		// inference: the batch norms folded into cuDNN's fused calls, with
		// the residual sums
		{[]string{resnet, "--backend", "cuda", "--mode", "infer"}, []string{"fold_batchnorm(nhwc)", "cast(nhwc)", "conv2d(relu k3x3 s1 p1 cudnn bf16 nhwc)  stem+stem_bn+stem_relu",
			"s1b1_conv2+s1b1_bn2+s1b1_sum+s1b1_out", "s1b1_conv2 + s1b1_sum -> conv2d (the sum and relu in the convolution's epilogue)", "forward (43 steps)"}},
		{[]string{"../../testdata/specs/bf16/convnet_bf16.cue", "--backend", "cuda"}, []string{"conv2d(relu k3x3 s2 p1 cudnn tf32)",
			"conv2d conv2d2: tf32, not bf16: x (relu1.out) stays float32: conv2d_bwd conv2d2 reads or writes it in float32 only (cuDNN multiplies bf16 only on bfloat16 tensors)"}},
		{[]string{tf32, "--backend", "cuda"}, []string{"conv2d(k3x3 s1 p1 cudnn tf32)", "precision: 40 of 42 matrix-product steps in tf32\n",
			"38 convolution steps: cudnn, cuDNN's tf32 calls on the tensors in place (no im2col columns, no col2im): a CIFAR ResNet-18 step 6.24 ms on an H200, 8.6 ms with tf32 im2col"}},
		// f32: the 3x3 stride-1 layers by Winograd, the strided ones and
		// the projections by im2col
		{[]string{f32, "--backend", "cuda"}, []string{"conv2d(k3x3 s1 p1 winograd F(4x4,3x3))", "conv2d_bwd(k3x3 s1 p1 winograd F(4x4,3x3))", "conv2d(k3x3 s2 p1 im2col+cublas)",
			"26 convolution steps: winograd F(4x4,3x3), not the library's: Winograd F(4x4,3x3) does a quarter of im2col's float32 products",
			"12 convolution steps: im2col+cublas, not the library's: im2col and cuBLAS measured faster in f32: a CIFAR ResNet-18 step 15.0 ms on an H200, 19.08 ms with cuDNN's float32 products"}},
		{[]string{tf32}, []string{"precision: 0 of 42 matrix-product steps in tf32\n", "gemm fc: f32, not tf32: the CPU has no TF32 arithmetic"}},
		{[]string{resnet}, []string{"conv2d(k3x3 s2 p1 im2col+gemm bf16)", "conv2d_bwd(k1x1 s2 p0 im2col+gemm bf16)", "conv2d(k3x3 s1 p1 direct f32)", "conv2d(k3x3 s1 p1 winograd F(4x4,3x3) f32)", "gemm(bf16)",
			"precision: 13 of 42 matrix-product steps in bf16\n", "conv2d stem: f32, not bf16: the direct method multiplies in float32", "conv2d s4b1_proj: f32, not bf16: the phase direct method multiplies in float32",
			"conv2d_bwd s1b1_conv1: f32, not bf16: the winograd F(4x4,3x3) method multiplies in float32"}},
	} {
		code, out, stderr := planCLI(c.args...)
		if code != ExitOK {
			t.Fatalf("%v: exit %d: %s", c.args, code, stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: output lacks %q:\n%s", c.args, w, out)
			}
		}
	}
	code, out, stderr := planCLI(bf16, "--format", "json")
	if code != ExitOK {
		t.Fatalf("json: exit %d: %s", code, stderr)
	}
	var p planner.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	if p.Precision != "bf16" || p.Forward[0].Attr.Precision != "bf16" {
		t.Errorf("json plan: precision %q, first step's %q; want bf16", p.Precision, p.Forward[0].Attr.Precision)
	}
}

func TestPlanJSON(t *testing.T) {
	code, out, stderr := planCLI("../../models/mnist.cue", "--format", "json", "--mode", "infer", "--batch", "3")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var p planner.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	if err := planner.Verify(&p); err != nil {
		t.Errorf("the printed plan does not verify: %v", err)
	}
	if p.Batch != 3 || p.Training || len(p.Backward) != 0 {
		t.Errorf("plan batch %d training %v backward %d", p.Batch, p.Training, len(p.Backward))
	}
}

func TestPlanUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"../../models/mnist.cue", "--format", "yaml"},
		{"../../models/mnist.cue", "--fusion", "maybe"},
		{"../../models/mnist.cue", "--mode", "eval"},
		{"../../models/mnist.cue", "--batch", "-2"},
		{},
	} {
		if code, _, stderr := planCLI(args...); code != ExitUsage || stderr == "" {
			t.Errorf("plan %v: exit %d, stderr %q", args, code, stderr)
		}
	}
	if code, _, stderr := planCLI("no-such-spec.cue"); code == ExitOK || stderr == "" {
		t.Errorf("missing file: exit %d, stderr %q", code, stderr)
	}
}
