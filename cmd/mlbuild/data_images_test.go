package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// imagesDir finds the photographs, the faces image folder and digits.npz
// that `make data` fetches and writes; the tests fail (never skip) without
// them.
func imagesDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("MLBUILD_IMAGES_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "data", "images")
	}
	for _, f := range []string{"china.jpg", "digits.npz", filepath.Join("faces", "face", "lfw000.jpg")} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("the image data sets are not in %s: run `make data` (or set MLBUILD_IMAGES_DIR): %v", dir, err)
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// runFail runs a produced program expecting exit code 1 and returns its
// output.
func runFail(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	b, err := cmd.CombinedOutput()
	if err == nil || cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("%s %s: exit %d, want 1:\n%s", filepath.Base(bin), strings.Join(args, " "), cmd.ProcessState.ExitCode(), b)
	}
	return string(b)
}

type evalJSON struct {
	Accuracy float64 `json:"accuracy"`
	Samples  int     `json:"samples"`
}

// TestFacesImageFolder trains models/faces.cue on the JPEG image folder
// written from scikit-image's lfw_subset, and checks test accuracy, the
// class predict gives a face and a non-face photograph, that eval applies
// the normalisation kept with the weights, and the error of a truncated
// JPEG in the folder.
func TestFacesImageFolder(t *testing.T) {
	data := imagesDir(t)
	tmp := t.TempDir()
	bin := compileExample(t, "faces", tmp)
	weights := filepath.Join(tmp, "faces.safetensors")
	out := runOK(t, bin, "train", "--data", data, "--out", weights, "--epochs", "30")
	if !strings.Contains(out, "MB/s") || !strings.Contains(out, "waiting") {
		t.Errorf("training progress shows no data rate:\n%s", out)
	}
	var ev evalJSON
	if err := json.Unmarshal([]byte(runOK(t, bin, "eval", "--data", data, "--weights", weights, "--json")), &ev); err != nil {
		t.Fatal(err)
	}
	// 50 held-out photographs, half faces; scikit-learn's MLP of the same
	// shape scores 0.96 (make compare-sklearn).
	if ev.Samples != 50 || ev.Accuracy < 0.9 {
		t.Errorf("eval: accuracy %.3f on %d samples", ev.Accuracy, ev.Samples)
	}
	out = runOK(t, bin, "predict", "--weights", weights,
		filepath.Join(data, "faces", "face", "lfw003.jpg"), filepath.Join(data, "faces", "nonface", "lfw180.jpg"))
	if !strings.Contains(out, "lfw003.jpg: class face (p=") || !strings.Contains(out, "lfw180.jpg: class nonface (p=") {
		t.Errorf("predict printed:\n%s", out)
	}
	// A colour photograph of another size: an error naming it without
	// --resize, a prediction (of its luma, resampled) with it.
	china := filepath.Join(data, "china.jpg")
	if msg := runFail(t, bin, "predict", "--weights", weights, china); !strings.Contains(msg, china+": the image is 427x640 pixels (height x width) but the model takes 25x25") {
		t.Errorf("wrong size: %s", msg)
	}
	if out := runOK(t, bin, "predict", "--weights", weights, "--resize", china); !strings.Contains(out, "china.jpg: class ") {
		t.Errorf("predict --resize printed:\n%s", out)
	}
	// Weights whose normalisation is damaged change what eval measures:
	// eval applies the statistics in the weights, not fresh ones.
	raw, err := os.ReadFile(weights)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(raw), `"mlbuild.normalize.mean":"[`)
	if i < 0 {
		t.Fatalf("the weights hold no normalize.mean:\n%.400s", raw)
	}
	bad := []byte(strings.Replace(string(raw), `"mlbuild.normalize.mean":"[0.`, `"mlbuild.normalize.mean":"[9.`, 1))
	shifted := filepath.Join(tmp, "shifted.safetensors")
	os.WriteFile(shifted, bad, 0o644)
	var ev2 evalJSON
	if err := json.Unmarshal([]byte(runOK(t, bin, "eval", "--data", data, "--weights", shifted, "--json")), &ev2); err != nil {
		t.Fatal(err)
	}
	if ev2.Accuracy > 0.7 {
		t.Errorf("eval with the mean shifted by 9 still scores %.3f: the weights' normalisation is not what eval applies", ev2.Accuracy)
	}

	// A truncated JPEG in a class folder: training stops with its name,
	// before the first step (its header says 100x100, not the model's
	// 25x25; the header of every image is read when the folder is opened).
	folder := filepath.Join(tmp, "data", "faces")
	for _, class := range []string{"face", "nonface"} {
		os.MkdirAll(filepath.Join(folder, class), 0o755)
		files, _ := filepath.Glob(filepath.Join(data, "faces", class, "*.jpg"))
		for _, f := range files {
			os.Symlink(f, filepath.Join(folder, class, filepath.Base(f)))
		}
	}
	trunc, err := os.ReadFile(filepath.Join(data, "truncated.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(folder, "face", "zz-cut.jpg")
	os.WriteFile(cut, trunc, 0o644)
	if msg := runFail(t, bin, "train", "--data", filepath.Join(tmp, "data"), "--out", filepath.Join(tmp, "x.safetensors"), "--epochs", "1"); !strings.Contains(msg, cut+": the image is 100x100 pixels") {
		t.Errorf("truncated JPEG: %s", msg)
	}
}

// TestRGBImageFolderProgram compiles a spec reading real colour
// photographs as RGB 3x24x32 images, resized, with ImageNet's per-channel
// normalisation given in the spec, trains it briefly, and predicts a JPEG
// and a PNG; a folder with an empty class is an error naming it.
func TestRGBImageFolderProgram(t *testing.T) {
	data := imagesDir(t)
	tmp := t.TempDir()
	for class, files := range map[string][]string{
		"animal": {"chelsea.png", "coffee.png"}, "sky": {"hubble_deep_field.jpg", "rocket.jpg"}, "scene": {"china.jpg", "flower.jpg"},
	} {
		os.MkdirAll(filepath.Join(tmp, "photos", class), 0o755)
		for _, f := range files {
			os.Symlink(filepath.Join(data, f), filepath.Join(tmp, "photos", class, f))
		}
	}
	spec := filepath.Join(tmp, "photos.cue")
	os.WriteFile(spec, []byte(`package photos

import "github.com/mlbuild/mlbuild/schema"

schema.#Spec & {
	name: "photos"
	model: {
		input: [3, 24, 32]
		layers: [
			{op: "conv2d", outChannels: 4, kernel: 3, padding: 1},
			{op: "relu"},
			{op: "flatten"},
			{op: "dense", units: 3},
		]
	}
	training: {optimizer: {kind: "adam", lr: 1e-3}, epochs: 3, batchSize: 2}
	dataset: {
		format: "imagefolder"
		train: "photos"
		test: "photos"
		classes: 3
		imageShape: [3, 24, 32]
		resize: true
		normalize: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]}
	}
}
`), 0o644)
	bin := filepath.Join(tmp, "photos-program")
	if code, out, errOut := mlbuild(t, "compile", spec, "-o", bin, "--cache-dir", filepath.Join(tmp, "cache")); code != 0 {
		t.Fatalf("compile exited %d:\n%s%s", code, out, errOut)
	}
	if info := runOK(t, bin, "info"); !strings.Contains(info, "resize to 24x32 (triangle filter); per-channel normalisation, mean [0.485 0.456 0.406] std [0.229 0.224 0.225]") {
		t.Errorf("info does not show the preprocessing:\n%s", info)
	}
	weights := filepath.Join(tmp, "photos.safetensors")
	runOK(t, bin, "train", "--data", tmp, "--out", weights, "--quiet")
	raw, _ := os.ReadFile(weights)
	if !strings.Contains(string(raw), `"mlbuild.normalize.mean":"[0.485,0.456,0.406]"`) || !strings.Contains(string(raw), `"mlbuild.classes":"[\"animal\",\"scene\",\"sky\"]"`) {
		t.Errorf("weights metadata: %.600s", raw)
	}
	var ev evalJSON
	if err := json.Unmarshal([]byte(runOK(t, bin, "eval", "--data", tmp, "--weights", weights, "--json")), &ev); err != nil || ev.Samples != 6 {
		t.Fatalf("eval: %v, %d samples", err, ev.Samples)
	}
	// The spec resizes, so predict does without being asked.
	out := runOK(t, bin, "predict", "--weights", weights, "--top", "3", filepath.Join(data, "rocket.jpg"), filepath.Join(data, "coffee.png"))
	for _, f := range []string{"rocket.jpg: class ", "coffee.png: class "} {
		if !strings.Contains(out, f) || strings.Count(out, "(p=") != 6 {
			t.Errorf("predict printed:\n%s", out)
		}
	}
	os.RemoveAll(filepath.Join(tmp, "photos", "sky"))
	os.MkdirAll(filepath.Join(tmp, "photos", "sky"), 0o755)
	if msg := runFail(t, bin, "train", "--data", tmp, "--out", filepath.Join(tmp, "x.safetensors")); !strings.Contains(msg, filepath.Join(tmp, "photos", "sky")+": the class folder holds no images") {
		t.Errorf("empty class: %s", msg)
	}
}

// TestDigitsNPZ trains models/digits.cue on scikit-learn's digits as an
// npz archive of a uint8 images array and an int64 labels array.
func TestDigitsNPZ(t *testing.T) {
	data := imagesDir(t)
	tmp := t.TempDir()
	bin := compileExample(t, "digits", tmp)
	weights := filepath.Join(tmp, "digits.safetensors")
	runOK(t, bin, "train", "--data", data, "--out", weights, "--quiet", "--epochs", "15")
	var ev evalJSON
	if err := json.Unmarshal([]byte(runOK(t, bin, "eval", "--data", data, "--weights", weights, "--json")), &ev); err != nil {
		t.Fatal(err)
	}
	// 359 held-out digits; scikit-learn's MLP of the same shape scores
	// 0.975 after 50 epochs (make compare-sklearn).
	if ev.Samples != 359 || ev.Accuracy < 0.93 {
		t.Errorf("eval: accuracy %.3f on %d samples", ev.Accuracy, ev.Samples)
	}
}
