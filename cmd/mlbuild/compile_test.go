package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"image"
	"image/jpeg"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mlbuild/mlbuild/rt/idx"
	"github.com/mlbuild/mlbuild/rt/imageio"
)

// mnistDir finds the MNIST files that `make data` fetches. The smoke test
// needs the real digits; it fails (never skips) without them.
func mnistDir(t *testing.T) string {
	t.Helper()
	return dataDir(t, "MLBUILD_MNIST_DIR", "mnist", "train-images-idx3-ubyte", "make data")
}

// dataDir is the folder holding file: env's value, else data/sub in the
// checkout. The tests that need real data fail (never skip) without it,
// naming the make target that fetches it.
func dataDir(t *testing.T, env, sub, file, target string) string {
	t.Helper()
	dir := os.Getenv(env)
	if dir == "" {
		dir = filepath.Join("..", "..", "data", sub)
	}
	if _, err := os.Stat(filepath.Join(dir, file)); err != nil {
		t.Fatalf("%s is not in %s: run `%s` (or set %s): %v", file, dir, target, env, err)
	}
	return dir
}

// mlbuild runs the command in-process and returns its exit code and output.
func mlbuild(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestCompileTrainEvalPredict is the smoke test of the whole pipeline:
// compile models/mnist.cue, train on a subset for two epochs, and check the
// loss falls and test accuracy is far above chance (0.1); then eval and predict.
func TestCompileTrainEvalPredict(t *testing.T) {
	data := mnistDir(t)
	tmp := t.TempDir()
	cacheDir := filepath.Join(tmp, "cache")
	bin := filepath.Join(tmp, "mnist")

	start := time.Now()
	code, out, errOut := mlbuild(t, "compile", "../../models/mnist.cue", "-o", bin, "--cache-dir", cacheDir)
	if code != 0 {
		t.Fatalf("compile exited %d:\n%s%s", code, out, errOut)
	}
	cold := time.Since(start)
	if !strings.Contains(out, "built") {
		t.Errorf("first compile should build, said %q", out)
	}
	checkMNISTBinary(t, bin)

	// A second compile is a cache hit, fast.
	start = time.Now()
	code, out, errOut = mlbuild(t, "compile", "../../models/mnist.cue", "-o", bin, "--cache-dir", cacheDir)
	if code != 0 || !strings.Contains(out, "cache hit") {
		t.Fatalf("second compile: exit %d, %q %q", code, out, errOut)
	}
	if hit := time.Since(start); hit > 2*time.Second {
		t.Errorf("cache hit took %v (cold build %v)", hit, cold)
	}

	metrics := filepath.Join(tmp, "metrics.jsonl")
	weights := filepath.Join(tmp, "w.safetensors")
	cmd := exec.Command(bin, "train", "--data", data, "--limit", "6000", "--epochs", "2", "--validation-split", "0",
		"--out", weights, "--metrics", metrics)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("train: %v\n%s", err, b)
	}
	var losses []float64
	var epochAcc float64
	f, err := os.Open(metrics)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var ev struct {
			Event string  `json:"event"`
			Loss  float64 `json:"loss"`
			Acc   float64 `json:"acc"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("metrics line %q: %v", sc.Text(), err)
		}
		switch ev.Event {
		case "step":
			losses = append(losses, ev.Loss)
		case "epoch":
			epochAcc = ev.Acc
		}
	}
	if len(losses) < 10 {
		t.Fatalf("want at least 10 step events in %s, got %d", metrics, len(losses))
	}
	// The mean of the last five steps against the first step's loss.
	var tail float64
	for _, l := range losses[len(losses)-5:] {
		tail += l / 5
	}
	if !(tail < losses[0]*0.5) {
		t.Errorf("loss did not fall: first step %.3f, mean of the last five %.3f", losses[0], tail)
	}

	// The same seed gives the same weights, bit for bit, also with several
	// threads (reductions run in a fixed order).
	again := filepath.Join(tmp, "again.safetensors")
	once := filepath.Join(tmp, "once.safetensors")
	for _, out := range []string{once, again} {
		cmd := exec.Command(bin, "train", "--data", data, "--limit", "1500", "--epochs", "1", "--validation-split", "0",
			"--threads", "3", "--out", out, "--quiet")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("train: %v\n%s", err, b)
		}
	}
	wa, _ := os.ReadFile(once)
	wb, _ := os.ReadFile(again)
	if len(wa) == 0 || !bytes.Equal(wa, wb) {
		t.Errorf("two trainings with the same seed gave different weights (%d and %d bytes)", len(wa), len(wb))
	}

	b, err := exec.Command(bin, "eval", "--data", data, "--weights", weights, "--json").Output()
	if err != nil {
		t.Fatalf("eval: %v", err)
	}
	var ev struct {
		Accuracy float64 `json:"accuracy"`
		Samples  int     `json:"samples"`
	}
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatalf("eval --json printed %q: %v", b, err)
	}
	if ev.Samples != 10000 || ev.Accuracy < 0.8 {
		t.Errorf("after two epochs on 6000 images: accuracy %.3f on %d samples (chance is 0.1; epoch training accuracy %.3f)", ev.Accuracy, ev.Samples, epochAcc)
	}

	b, err = exec.Command(bin, "predict", "--weights", weights, "--limit", "3", filepath.Join(data, "t10k-images-idx3-ubyte")).Output()
	if err != nil {
		t.Fatalf("predict: %v", err)
	}
	if n := strings.Count(string(b), "class "); n != 3 {
		t.Errorf("predict printed %d predictions, want 3:\n%s", n, b)
	}

	// The same first test digit as a PGM image and as a PNG gives the same
	// class as from the IDX file.
	im, err := idx.OpenImages(filepath.Join(data, "t10k-images-idx3-ubyte"))
	if err != nil {
		t.Fatal(err)
	}
	pix := make([]float32, 28*28)
	im.Batch(pix, []int{0})
	im.Close()
	pgm := filepath.Join(tmp, "digit.pgm")
	if err := os.WriteFile(pgm, imageio.EncodePGM(pix, 28, 28), 0o644); err != nil {
		t.Fatal(err)
	}
	gray := image.NewGray(image.Rect(0, 0, 28, 28))
	for i, v := range pix {
		gray.Pix[i] = uint8(v*255 + 0.5)
	}
	var pngBytes bytes.Buffer
	if err := png.Encode(&pngBytes, gray); err != nil {
		t.Fatal(err)
	}
	pngPath := filepath.Join(tmp, "digit.png")
	if err := os.WriteFile(pngPath, pngBytes.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var jpegBytes bytes.Buffer
	if err := jpeg.Encode(&jpegBytes, gray, &jpeg.Options{Quality: 100}); err != nil {
		t.Fatal(err)
	}
	jpegPath := filepath.Join(tmp, "digit.jpg")
	if err := os.WriteFile(jpegPath, jpegBytes.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	b2, err := exec.Command(bin, "predict", "--weights", weights, pgm, pngPath, jpegPath).Output()
	if err != nil {
		t.Fatalf("predict on images: %v", err)
	}
	first := strings.SplitN(string(b), "\n", 2)[0]
	class := first[strings.Index(first, "class "):strings.Index(first, " (p=")]
	for _, line := range strings.Split(strings.TrimSpace(string(b2)), "\n") {
		if !strings.Contains(line, class+" (") {
			t.Errorf("image prediction %q differs from the IDX one %q", line, first)
		}
	}
}

// mnistBinaryBudget is the most bytes the program of models/mnist.cue may
// take (for linux/amd64, as the smoke test builds it): 2,916,478 at
// 96f696e with Go 1.26.8, 2,982,014 with the CPU's Winograd kernels,
// 3,010,686 with SGEMM's in-place small-product kernels (d0368ad),
// 2,965,630 once its sorts, its tables and its dataset code were trimmed
// (branch binsize), 2,973,822 with Winograd F(4×4,5×5) in place of
// F(2×2,5×5) (branch cpu-wino4), 2,982,014 with F(4×4)'s dy-transform
// kernels and SGEMM-based filter transform (branch wino4-tune), 3,002,494
// with the arenas made at run time, each buffer's view assigned in code,
// and the memory check before each phase (branch arena), 3,059,838 with
// issue 27's and 24's program features (branch app-ux: help and info
// without a GPU, the memory report, paced checkpoints, short batches
// through the one-sample plan, the run's split kept in the weights,
// headerless CSV files) and issue 26's checks of hostile data files and
// guards of the outputs (branch hostile-data: regular files only, weights
// refused from their header or for a NaN, the checkpoint's fields checked
// and its paths kept, --metrics and predict --output guarded, predict going
// on after a bad input), 3,080,318 with issue 31's text and token pieces
// that every program carries (the generate command's entry, bench's and
// selftest's token ids, the bad-id check), bench's peak memory report and
// the threads' copy of the weights, 3,092,606 with huge-page arenas and
// embedded weights mapped as the state arena (raw system calls: the
// syscall and os wrappers would add 20 KB), and a few pages of room for
// another Go; 3,100,798 with the KV cache's selftest hook and gradient
// clipping, 3,108,990 with the IDX readers' resize, pad and normalize
// (Fashion-MNIST at 32×32 for a ResNet), 3,117,182 with gradient
// accumulation's training loop, train's --gpus and generate's jumping
// window, 3,125,374 with train's --nodes, --rendezvous and --sync-bn flags
// and their checks (their help text: the rendezvous itself is not linked)
// and the one-pass count of a text step's correct tokens, 3,137,662 with
// rt/cpu's float32 AVX-512 kernels of GELU, e^x and dropout (their Go
// twins for other CPUs) and the four-row matrix-vector kernel, which every
// CPU program links through its element-wise and dense dispatch, and
// 3,141,758 with the bfloat16 branches of Sgemm's blocking (a path's
// pairs: its steps, packers and edge tiles; the AVX512-BF16 path itself
// is made on first use, so an f32 program links none of its kernels), and
// 3,154,046 with the general max pool's row loop (maxPoolPlane: its
// MaxPool2DFwd links it beside the 2×2 kernel), the float32 sigmoid and
// SiLU kernels that UnaryFwd's dispatch reaches, and the Winograd
// driver's filter side and packed-filter transform (winoPackFilters: its
// second layer runs F(4×4,5×5)), and 3,162,238 with the AVX-512 kernel of
// the 3×3 stride-2 max pool's rows (maxPool3s2RowAVX512, which
// maxPoolPlane reaches beside the 2×2 kernel: the program links every max
// pool's forward), and 3,170,430 with rt/cpu's pointwise epilogue (the row
// kernels rowBiasActAVX512 and rowBiasActAVX2 in the epilogue table every
// program links, ReLU6's clamp) and rt/app's MLBUILD_CPU_KERNELS check and
// info line: 4.5 KB of code that crossed into two more pages, and
// 3,178,622 with the AVX2 sigmoid and SiLU kernels (their eight-lane
// constant table: the epilogue table links them) and the gradient
// check's time bound (its note and its reading of
// MLBUILD_GRADCHECK_SECONDS); 3,182,718 with the attention's exponentials
// summed in their pass (expShiftSumAVX512, in the epilogue table) and the
// dense backward's dx += (GemmBwdAdd's path, which GemmBwd shares);
// 3,190,910 with the direct method's four-channel kernels of 56 and 96
// positions and Winograd's products on the in-place tiles (issue #30,
// one-sample ResNets: 7² layers 12% and 3×3 stride-2 ones up to 16%
// faster; the first 814 bytes over took a page); 3,195,006 with
// Winograd's clearing of the padded image's borders alone
// (winoClearBorders: another page).
// Issue 16 asks for 2 MB; docs/architecture.md (Where the bytes go) says
// where they go and why 2 MB is out of reach of this program's features. The budget
// catches a reader or a heavy package slipping back into every program.
const mnistBinaryBudget = 3_196_000

// checkMNISTBinary checks the size of the program of models/mnist.cue and
// what it links: the function names that a stripped Go binary keeps for
// its stack traces must name none of the readers its IDX dataset does not
// need (CSV, npz and its zip reader and deflate compressor, image folders,
// npy datasets, the preprocessing that the other formats fit), no
// encoding/json (rt/jsontext does its work), no PNG encoder (sample writes
// stored PNGs), no reflection-driven encoding/binary.Write, no
// text/tabwriter (rt/app's columns lays out its tables) and no text
// dataset's tokenizer (rt/textdata: train's check of a text checkpoint's
// vocabulary is a method of the text windows, which only text programs
// link).
func checkMNISTBinary(t *testing.T, bin string) {
	t.Helper()
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > mnistBinaryBudget {
		t.Errorf("the program of models/mnist.cue is %d bytes, over its budget of %d", len(b), mnistBinaryBudget)
	}
	for _, pkg := range []string{"encoding/json.", "encoding/csv.", "/rt/csvdata.", "archive/zip.", "compress/flate.(*compressor)", "/rt/npz.", "/rt/app.openImageFolder", "/rt/app.checkArrays", "/rt/app.predictCSV", "image/png.(*encoder)", "encoding/binary.Write", "text/tabwriter.", "/rt/app.fitRecord", "/rt/app.openSplit", "/rt/textdata."} {
		if bytes.Contains(b, []byte(pkg)) {
			t.Errorf("the program of models/mnist.cue links %s, which nothing it does needs", strings.TrimSuffix(pkg, "."))
		}
	}
	// predict reads PNG and JPEG digits: main.go imports the decoders,
	// which rt/imageio uses through package image's registry.
	for _, dec := range imageDecoders {
		if !bytes.Contains(b, []byte(dec)) {
			t.Errorf("the program of models/mnist.cue does not link %s, which predict needs for its images", dec)
		}
	}
}

// imageDecoders are names of functions of the PNG and JPEG decoders, which
// the stripped binary of a program keeps when it links them.
var imageDecoders = []string{"image/png.(*decoder)", "image/jpeg.(*decoder)"}

// checkFeatureRowsBinary checks that the program of a model of feature
// rows (a CSV dataset) links neither the PNG and JPEG decoders (about
// 135 KB of it) nor the IDX reader and its gzip decompressor: its predict
// takes no images and its datasets are no IDX files.
func checkFeatureRowsBinary(t *testing.T, bin string) {
	t.Helper()
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range append(imageDecoders, "/rt/idx.OpenImages", "/rt/app.openIDX", "compress/flate.(*decompressor)") {
		if bytes.Contains(b, []byte(name)) {
			t.Errorf("%s links %s, but its model takes neither images nor IDX files", bin, name)
		}
	}
}

// TestCompileRejectsInvalidSpec: an illegal spec fails with exit 1 and a
// positioned message, and nothing is built.
func TestCompileRejectsInvalidSpec(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.cue")
	src, err := os.ReadFile("../../models/mnist.cue")
	if err != nil {
		t.Fatal(err)
	}
	// Turn the first dense layer's width into something the next layer's
	// declared input cannot accept by breaking the kernel size.
	broken := strings.Replace(string(src), "kernel: 5", "kernel: 50", 1)
	if broken == string(src) {
		t.Fatal("models/mnist.cue no longer has `kernel: 5`; update this test")
	}
	if err := os.WriteFile(bad, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "never")
	code, _, errOut := mlbuild(t, "compile", bad, "-o", out, "--cache-dir", filepath.Join(dir, "cache"))
	if code != ExitInvalid {
		t.Errorf("exit %d, want %d; stderr:\n%s", code, ExitInvalid, errOut)
	}
	if !strings.Contains(errOut, "bad.cue:") {
		t.Errorf("message has no position in bad.cue:\n%s", errOut)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a binary was written for an invalid spec")
	}
}

// TestTargetMemoryLimit checks that a 32-bit target caps the memory limit
// at what its program can hold, and says so, while a 64-bit target keeps
// the limit it was given.
func TestTargetMemoryLimit(t *testing.T) {
	for _, c := range []struct {
		limit        int64
		goarch       string
		want         int64
		wantFromUser bool
	}{
		{0, "amd64", 0, true},
		{64 << 30, "arm64", 64 << 30, true},
		{0, "386", math.MaxInt32, false},
		{64 << 30, "arm", math.MaxInt32, false},
		{1 << 30, "mipsle", 1 << 30, true},
		{64 << 30, "wasm", math.MaxInt32, false},
	} {
		got, source := targetMemoryLimit(c.limit, "--memory-limit", "linux", c.goarch)
		if got != c.want || (source == "--memory-limit") != c.wantFromUser {
			t.Errorf("targetMemoryLimit(%d, linux/%s) = %d, %q; want %d", c.limit, c.goarch, got, source, c.want)
		}
		if !c.wantFromUser && !strings.Contains(source, "linux/"+c.goarch+", a 32-bit target") {
			t.Errorf("linux/%s: the source %q does not name the target", c.goarch, source)
		}
	}
}
