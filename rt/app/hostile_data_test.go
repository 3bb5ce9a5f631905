package app

import (
	"archive/zip"
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mlbuild/mlbuild/rt/imageio"
	"github.com/mlbuild/mlbuild/rt/npy"
	"github.com/mlbuild/mlbuild/rt/safetensors"
)

// rewriteTensor rewrites the safetensors file at path with edit applied to
// its tensors (metadata kept).
func rewriteTensor(t *testing.T, path string, edit func(ts []safetensors.Tensor)) {
	t.Helper()
	f, err := safetensors.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	edit(f.Tensors)
	if err := safetensors.Write(path, f.Tensors, f.Metadata); err != nil {
		t.Fatal(err)
	}
}

// TestNonFiniteWeightsRefused: weights with a NaN or Inf are refused by
// predict, eval and train --init (and a checkpoint with an Inf weight by
// --resume), naming the tensor; predict printed
// "class 0 (p=NaN)" and exited 0.
func TestNonFiniteWeightsRefused(t *testing.T) {
	dir := trainedLin(t)
	bad := filepath.Join(dir, "nan.safetensors")
	data, err := os.ReadFile(filepath.Join(dir, "lin.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, data, 0o644); err != nil {
		t.Fatal(err)
	}
	rewriteTensor(t, bad, func(ts []safetensors.Tensor) {
		for i := range ts {
			if ts[i].Name == "dense1.bias" {
				ts[i].Data[2] = float32(math.NaN())
			}
		}
	})
	for _, args := range [][]string{
		{"predict", "--weights", bad, "digit.pgm"},
		{"eval", "--weights", bad, "--data", "data"},
		{"train", "--init", bad, "--data", "data", "--epochs", "1", "--out", "new.safetensors", "--quiet"},
	} {
		code, out, errOut := runLin(t, dir, args...)
		if code != exitFailure || !strings.Contains(errOut, `tensor "dense1.bias" holds NaN at element 2`) {
			t.Errorf("%q: exit %d (want %d), stderr lacks the tensor:\n%s%s", args, code, exitFailure, out, errOut)
		}
	}
	ckpt := filepath.Join(dir, "lin.ckpt.safetensors")
	rewriteTensor(t, ckpt, func(ts []safetensors.Tensor) {
		for i := range ts {
			if ts[i].Name == "dense1.weight" {
				ts[i].Data[0] = float32(math.Inf(1))
			}
		}
	})
	code, out, errOut := runLin(t, dir, "train", "--resume", ckpt, "--epochs", "3", "--quiet")
	if code != exitFailure || !strings.Contains(errOut, `holds +Inf at element 0`) || !strings.Contains(errOut, `tensor "dense1.weight"`) {
		t.Errorf("--resume of a checkpoint with an Inf moment: exit %d\n%s%s", code, out, errOut)
	}
}

// withTimeout runs f, failing the test when it has not returned within d
// (a read of a FIFO or of /dev/zero would otherwise hang the test).
func withTimeout(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s: still running after %v", what, d)
	}
}

// TestSpecialFilesRefused: a FIFO or a device among the data files, or
// given to predict, is refused with its path before it is opened; a FIFO
// was waited on for ever and /dev/zero read for ever.
func TestSpecialFilesRefused(t *testing.T) {
	dir := trainedLin(t)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("cannot make a FIFO here: %v", err)
	}
	data := filepath.Join(dir, "data")
	for _, c := range []struct {
		file, target, kind string
	}{
		{"train-images", fifo, "a FIFO (named pipe)"},
		{"train-labels", "/dev/zero", "a character device"},
	} {
		path := filepath.Join(data, c.file)
		saved := path + ".saved"
		if err := os.Rename(path, saved); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(c.target, path); err != nil {
			t.Fatal(err)
		}
		withTimeout(t, 20*time.Second, "train with "+c.file+" → "+c.target, func() {
			code, out, errOut := runLin(t, dir, "train", "--data", "data", "--epochs", "1", "--quiet", "--out", "x.safetensors")
			if want := filepath.Join("data", c.file) + " is " + c.kind + ", not a regular file"; code != exitFailure || !strings.Contains(errOut, want) {
				t.Errorf("%s → %s: exit %d, stderr lacks %q:\n%s%s", c.file, c.target, code, want, out, errOut)
			}
		})
		os.Remove(path)
		os.Rename(saved, path)
	}
	for _, input := range []string{fifo, "/dev/zero"} {
		withTimeout(t, 20*time.Second, "predict "+input, func() {
			code, out, errOut := runLin(t, dir, "predict", "--weights", "lin.safetensors", input)
			if code != exitFailure || !strings.Contains(errOut, input+" is a ") {
				t.Errorf("predict %s: exit %d\n%s%s", input, code, out, errOut)
			}
		})
	}
}

// imageFolderLin is the test model reading a folder of 4×4 grey images
// (class c's bright quadrant is c), 8 of each class, under dir/imgs.
func imageFolderLin(t *testing.T, dir string) *linearModel {
	t.Helper()
	for c, name := range []string{"c0", "c1", "c2", "c3"} {
		sub := filepath.Join(dir, "imgs", name)
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range 8 {
			pix := make([]float32, 16)
			for y := range 4 {
				for x := range 4 {
					if (y/2)*2+x/2 == c {
						pix[y*4+x] = 0.8 + 0.02*float32(i)
					}
				}
			}
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("%d.pgm", i)), imageio.EncodePGM(pix, 4, 4), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	m := newLinearModel()
	m.meta.Data = DataSpec{Format: "imagefolder", Task: "classification", Train: "imgs", TestSplit: 0.25}
	return m
}

// TestBadImagesFoundBeforeTraining: a corrupt image, one cut short and one
// of another size are named before the first step (they failed when their
// batch came up, epochs into the run); --skip-bad-images trains on the
// others with a warning for each; a FIFO among the images is refused.
func TestBadImagesFoundBeforeTraining(t *testing.T) {
	dir := t.TempDir()
	imageFolderLin(t, dir)
	bad := map[string][]byte{
		filepath.Join("imgs", "c1", "corrupt.png"): []byte("\x89PNG\r\n\x1a\n not really"),
		filepath.Join("imgs", "c2", "cut.pgm"):     []byte("P5 4 4 255\n\x00\x01"),
		filepath.Join("imgs", "c3", "big.pgm"):     imageio.EncodePGM(make([]float32, 25), 5, 5),
	}
	for name, b := range bad {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) (int, string, string, string) {
		metrics := filepath.Join(dir, "m.jsonl")
		os.Remove(metrics)
		m := imageFolderLin(t, dir)
		code, out, errOut := runModel(t, dir, m, append([]string{"train", "--data", ".", "--epochs", "2", "--quiet", "--metrics", metrics}, args...)...)
		b, _ := os.ReadFile(metrics)
		return code, out, errOut, string(b)
	}
	code, out, errOut, metrics := run()
	if code != exitFailure || strings.Contains(metrics, `"step"`) {
		t.Errorf("bad images: exit %d (want %d), or training ran:\n%s%s", code, exitFailure, out, errOut)
	}
	for name := range bad {
		if !strings.Contains(errOut, name+": ") {
			t.Errorf("the message does not name %s:\n%s", name, errOut)
		}
	}
	for _, want := range []string{"3 files of the image folder cannot be used", "--skip-bad-images", "needs 16 bytes of pixels", "the image is 5x5 pixels"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("the message lacks %q:\n%s", want, errOut)
		}
	}
	code, out, errOut, metrics = run("--skip-bad-images")
	if code != 0 || !strings.Contains(metrics, `"step"`) {
		t.Errorf("--skip-bad-images: exit %d:\n%s%s", code, out, errOut)
	}
	for name := range bad {
		if !strings.Contains(errOut, "warning: skipping "+name+": ") {
			t.Errorf("--skip-bad-images: no warning naming %s:\n%s", name, errOut)
		}
	}
	// The help names the flag.
	if _, out, _ := runModel(t, dir, imageFolderLin(t, dir), "train", "--help"); !strings.Contains(out, "--skip-bad-images") {
		t.Errorf("train --help does not document --skip-bad-images:\n%s", out)
	}
	for name := range bad {
		os.Remove(filepath.Join(dir, name))
	}
	// A FIFO named like an image is refused, named, without waiting on it.
	fifo := filepath.Join("imgs", "c0", "pipe.png")
	if err := syscall.Mkfifo(filepath.Join(dir, fifo), 0o644); err != nil {
		t.Skipf("cannot make a FIFO here: %v", err)
	}
	withTimeout(t, 20*time.Second, "an image folder with a FIFO", func() {
		code, out, errOut, _ := run()
		if code != exitFailure || !strings.Contains(errOut, fifo+" is a FIFO (named pipe), not a regular file") {
			t.Errorf("a FIFO among the images: exit %d\n%s%s", code, out, errOut)
		}
	})
}

// TestNonUTF8ClassFolder: a class folder whose name is not UTF-8 is
// refused, named, when the folder is opened.
func TestNonUTF8ClassFolder(t *testing.T) {
	dir := t.TempDir()
	imageFolderLin(t, dir)
	if err := os.Rename(filepath.Join(dir, "imgs", "c3"), filepath.Join(dir, "imgs", "c\xff3")); err != nil {
		t.Skipf("this file system does not take such a name: %v", err)
	}
	code, out, errOut := runModel(t, dir, imageFolderLin(t, t.TempDir()), "train", "--data", dir, "--epochs", "1", "--quiet")
	if code != exitFailure || !strings.Contains(errOut, `class folder "c\xff3" has a name that is not UTF-8 text`) {
		t.Errorf("non-UTF-8 class folder: exit %d\n%s%s", code, out, errOut)
	}
}

// TestCSVLineBoundedBySpec: the program bounds a CSV line by the spec's
// columns (2 features and a label: LineLimit(3) bytes), so a line of 1 MiB
// of tiny cells is refused at its line number, for training and predict.
func TestCSVLineBoundedBySpec(t *testing.T) {
	dir := t.TempDir()
	text := "1,2,0\n3,4,1\n" + strings.Repeat("0,", 1<<19) + "1\n"
	if err := os.WriteFile(filepath.Join(dir, "t.csv"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	meta := &Meta{Name: "t", InputShape: []int{2}, Classes: 2, Batch: 1, Readers: allReaders,
		Defaults: Defaults{Loss: "softmax_cross_entropy"},
		Data:     DataSpec{Format: "csv", Task: "classification", Train: "t.csv", TestSplit: 0.5}}
	want := "t.csv:3: the line is longer than 4864 bytes, more than 3 columns"
	if _, err := openTrainSet(meta, dir, 0); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("train: got %v, want %q", err, want)
	}
	p := &predictor{meta: meta}
	if _, err := p.readCSV(filepath.Join(dir, "t.csv")); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("predict: got %v, want %q", err, want)
	}
}

// TestNPZBoundedBySpec: the program checks an archive's arrays against
// the model from their headers, before inflating them: features of
// another row size, however many rows they claim, and labels for another
// number of samples are refused, and features whose data inflate past
// their shape are refused at the first byte more.
func TestNPZBoundedBySpec(t *testing.T) {
	dir := t.TempDir()
	arr := func(shape []int, extra int) []byte {
		n := 1
		for _, d := range shape {
			n *= d
		}
		var b bytes.Buffer
		npy.Encode(&b, shape, make([]float32, n))
		return append(b.Bytes(), make([]byte, extra)...)
	}
	write := func(x, y []byte) {
		f, err := os.Create(filepath.Join(dir, "d.npz"))
		if err != nil {
			t.Fatal(err)
		}
		zw := zip.NewWriter(f)
		for name, b := range map[string][]byte{"x.npy": x, "y.npy": y} {
			w, _ := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate})
			w.Write(b)
		}
		zw.Close()
		f.Close()
	}
	meta := newLinearModel().Meta()
	meta.Data = DataSpec{Format: "npz", Task: "classification", Train: "d.npz", TestSplit: 0.25}
	for _, c := range []struct {
		x, y []byte
		want string
	}{
		{arr([]int{8, 3}, 0), arr([]int{8}, 0), "d.npz[x]: shape (8, 3) gives 3 values per sample but the model takes 16"},
		{arr([]int{8, 16}, 8<<20), arr([]int{8}, 0), "d.npz[x]: more bytes follow the 512 bytes of data that shape (8, 16) of float32 needs"},
		{arr([]int{8, 4, 4}, 0), arr([]int{9}, 0), "d.npz[y]: shape (9,): the labels must be 1 per sample for the 8 samples of"},
	} {
		write(c.x, c.y)
		if _, err := openTrainSet(meta, dir, 0); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
}

// TestOtherWeightsCostTheirHeader: weights of another model are refused
// from their header, before the file is read: a 64 MiB file costs well
// under 1 MiB (it was read whole first, whatever its size).
func TestOtherWeightsCostTheirHeader(t *testing.T) {
	dir := trainedLin(t)
	big := filepath.Join(dir, "big.safetensors")
	if err := safetensors.Write(big, []safetensors.Tensor{{Name: "dense1.weight", Shape: []int{4096, 4096}, Data: make([]float32, 4096*4096)}}, map[string]string{"mlbuild.model": "other"}); err != nil {
		t.Fatal(err)
	}
	m := newLinearModel()
	var err error
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	err = loadWeights(m, big)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), `tensor "dense1.weight" is [4096 4096] in the file, the model needs [4 16]`) {
		t.Errorf("got %v", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Errorf("refusing another model's weights allocated %d bytes", got)
	}
}
