package app

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/rt/imageio"
)

// imagesDir finds the photographs of Debian's python3-skimage and
// python3-sklearn that `make data` fetches; the tests fail, never skip,
// without them.
func imagesDir(t *testing.T) string {
	t.Helper()
	return testDataDir(t, "MLBUILD_IMAGES_DIR", "images", "china.jpg", "the photographs")
}

// photoFolder lays out real colour photographs (JPEG and PNG, of several
// sizes) as an image folder of two classes under tmp/photos, and returns
// the files of each class in the order the folder lists them.
func photoFolder(t *testing.T, tmp string) map[string][]string {
	t.Helper()
	src := imagesDir(t)
	classes := map[string][]string{
		"skimage": {"chelsea.png", "coffee.png", "hubble_deep_field.jpg", "rocket.jpg"},
		"sklearn": {"china.jpg", "flower.jpg"},
	}
	out := map[string][]string{}
	for class, files := range classes {
		dir := filepath.Join(tmp, "photos", class)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			b, err := os.ReadFile(filepath.Join(src, f))
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(dir, f), b, 0o644)
			out[class] = append(out[class], filepath.Join(dir, f))
		}
	}
	return out
}

// photoMeta is a model reading the photographs as RGB 24x32 images.
func photoMeta(resize bool, norm ...[]float64) *Meta {
	m := &Meta{Name: "photos", InputShape: []int{3, 24, 32}, Classes: 2, Batch: 4, Readers: allReaders,
		Defaults: Defaults{Loss: "softmax_cross_entropy"},
		Data:     DataSpec{Format: "imagefolder", Task: "classification", Train: "photos", Test: "photos", Resize: resize}}
	if len(norm) == 2 {
		m.Data.Normalize, m.Data.NormalizeMean, m.Data.NormalizeStd = true, norm[0], norm[1]
	} else {
		m.Data.Normalize, m.Data.NormalizeFit = true, true
	}
	return m
}

// TestRGBImageFolder reads real JPEG and PNG photographs as an RGB image
// folder resized to the model input, with the per-channel normalisation
// fitted on them, and checks the batches against imageio read directly,
// the fitted statistics against a direct computation, and the record kept
// with the weights.
func TestRGBImageFolder(t *testing.T) {
	tmp := t.TempDir()
	files := photoFolder(t, tmp)
	meta := photoMeta(true)
	ds, err := openTrainSet(meta, tmp, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.close()
	if ds.n != 6 || !slices.Equal(meta.rec.classNames, []string{"skimage", "sklearn"}) {
		t.Fatalf("%d images, classes %v; want 6 of skimage, sklearn", ds.n, meta.rec.classNames)
	}
	// What each image is, read directly: RGB planes resized to 24x32.
	const n = 3 * 24 * 32
	var direct [][]float32
	var sum, sq [3]float64
	for _, class := range []string{"skimage", "sklearn"} {
		for _, f := range files[class] {
			pix, h, w, err := imageio.LoadChannels(f, 3)
			if err != nil {
				t.Fatal(err)
			}
			small, err := imageio.FitChannels(pix, 3, h, w, 24, 32, true)
			if err != nil {
				t.Fatal(err)
			}
			direct = append(direct, small)
			for i, v := range small {
				sum[i/(24*32)] += float64(v)
				sq[i/(24*32)] += float64(v) * float64(v)
			}
		}
	}
	for c := range 3 {
		mean := sum[c] / (6 * 24 * 32)
		sd := math.Sqrt(sq[c]/(6*24*32) - mean*mean)
		if math.Abs(float64(meta.rec.cmean[c])-mean) > 1e-5 || math.Abs(float64(meta.rec.cstd[c])-sd) > 1e-5 {
			t.Errorf("channel %d: fitted mean %v std %v, direct %v %v", c, meta.rec.cmean[c], meta.rec.cstd[c], mean, sd)
		}
	}
	x := make([]float32, 6*n)
	y := make([]float32, 6*2)
	if err := ds.fill(x, y, all(6)); err != nil {
		t.Fatal(err)
	}
	for k := range 6 {
		wantClass := 0
		if k >= 4 {
			wantClass = 1
		}
		if y[k*2+wantClass] != 1 {
			t.Errorf("image %d: label row %v, want class %d", k, y[k*2:k*2+2], wantClass)
		}
		for i, v := range direct[k] {
			c := i / (24 * 32)
			want := (v - meta.rec.cmean[c]) / meta.rec.cstd[c]
			if math.Abs(float64(x[k*n+i]-want)) > 1e-5 {
				t.Fatalf("image %d value %d is %v, want (%v - %v) / %v = %v", k, i, x[k*n+i], v, meta.rec.cmean[c], meta.rec.cstd[c], want)
			}
		}
	}

	// The record goes into the weights' metadata and comes back whole.
	md := map[string]string{}
	meta.rec.metadata(md)
	back, err := readRecord(meta, "w.safetensors", md)
	if err != nil || !slices.Equal(back.cmean, meta.rec.cmean) || !slices.Equal(back.cstd, meta.rec.cstd) {
		t.Fatalf("record read back: %v, %v %v; want %v %v", err, back.cmean, back.cstd, meta.rec.cmean, meta.rec.cstd)
	}
	delete(md, mdChanStd)
	if _, err := readRecord(meta, "w.safetensors", md); err == nil || !strings.Contains(err.Error(), "w.safetensors holds no "+mdChanStd) {
		t.Errorf("weights without the deviations: %v", err)
	}

	// Values given in the spec are applied as they are (ImageNet's here).
	mean, std := []float64{0.485, 0.456, 0.406}, []float64{0.229, 0.224, 0.225}
	given := photoMeta(true, mean, std)
	// Weights without channel statistics (imported ones) take the spec's
	// fixed values; fitted statistics must come with the weights (above).
	if rec, err := readRecord(given, "w.safetensors", map[string]string{}); err != nil ||
		!slices.Equal(rec.cmean, float32s(mean)) || !slices.Equal(rec.cstd, float32s(std)) {
		t.Errorf("weights without statistics, spec with fixed values: %v, %v", err, rec)
	}
	ds2, err := openTrainSet(given, tmp, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ds2.close()
	if err := ds2.fill(x[:n], y[:2], []int{5}); err != nil {
		t.Fatal(err)
	}
	for i, v := range direct[5] {
		c := i / (24 * 32)
		if want := (v - float32(mean[c])) / float32(std[c]); math.Abs(float64(x[i]-want)) > 1e-5 {
			t.Fatalf("value %d is %v, want %v", i, x[i], want)
		}
	}
}

// TestImageFolderStreams checks that opening an image folder reads no
// image and that a batch reads only its own files: a folder larger than
// memory is decoded a batch at a time.
func TestImageFolderStreams(t *testing.T) {
	tmp := t.TempDir()
	files := photoFolder(t, tmp)
	meta := photoMeta(true, []float64{0, 0, 0}, []float64{1, 1, 1})
	ds, err := openTrainSet(meta, tmp, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.close()
	src := ds.src.(*imageFolderSource)
	if got := src.bytesRead(); got != 0 {
		t.Fatalf("opening the folder read %d bytes of images", got)
	}
	l := newBatchLoader(ds, 2)
	defer l.stop()
	l.start([]int{1, 4})
	if err := l.next(make([]float32, 2*ds.features), make([]float32, 4)); err != nil {
		t.Fatal(err)
	}
	var want int64
	for _, f := range []string{files["skimage"][1], files["sklearn"][0]} {
		fi, _ := os.Stat(f)
		want += fi.Size()
	}
	if got := l.bytesRead(); got != want {
		t.Errorf("one batch of two images read %d bytes, want their %d", got, want)
	}
}

// TestImageFolderErrors puts real bad data in image folders: scikit-image's
// truncated JPEG, photographs of another size without resize, an empty
// class folder and a model whose input is neither grey nor RGB. Each error
// names the image or folder and says what is wrong.
func TestImageFolderErrors(t *testing.T) {
	tmp := t.TempDir()
	photoFolder(t, tmp)
	fill := func(meta *Meta) error {
		ds, err := openTrainSet(meta, tmp, 0)
		if err != nil {
			return err
		}
		defer ds.close()
		return ds.fill(make([]float32, ds.n*ds.features), make([]float32, ds.n*ds.width), all(ds.n))
	}
	// Without resize, the first photograph (in batch order) of the wrong
	// size is named, with both sizes and the fix.
	err := fill(photoMeta(false, []float64{0, 0, 0}, []float64{1, 1, 1}))
	chelsea := filepath.Join(tmp, "photos", "skimage", "chelsea.png")
	if err == nil || !strings.Contains(err.Error(), chelsea+": the image is 300x451 pixels (height x width) but the model takes 24x32") || !strings.Contains(err.Error(), "resize: true") {
		t.Errorf("wrong size: %v", err)
	}
	// A truncated JPEG fails its batch, named.
	trunc, err := os.ReadFile(filepath.Join(imagesDir(t), "truncated.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(tmp, "photos", "sklearn", "truncated.jpg")
	os.WriteFile(bad, trunc, 0o644)
	if err := fill(photoMeta(true)); err == nil || !strings.HasPrefix(err.Error(), bad+": truncated JPEG") {
		t.Errorf("truncated JPEG: %v", err)
	}
	os.Remove(bad)
	// A model input of 4 channels is refused when the folder is opened.
	four := photoMeta(true, []float64{0, 0, 0, 0}, []float64{1, 1, 1, 1})
	four.InputShape = []int{4, 24, 32}
	if err := fill(four); err == nil || !strings.Contains(err.Error(), "grey ([1, height, width] or [height, width]) or RGB ([3, height, width]) images, but the model input is 4×24×32") {
		t.Errorf("4 channels: %v", err)
	}
	// A grey model reads the colour photographs as their luma.
	grey := photoMeta(true, []float64{0}, []float64{1})
	grey.InputShape = []int{1, 24, 32}
	if err := fill(grey); err != nil {
		t.Errorf("grey model on colour photographs: %v", err)
	}
	// A class folder may be a link to one elsewhere.
	os.Rename(filepath.Join(tmp, "photos", "sklearn"), filepath.Join(tmp, "elsewhere"))
	os.Symlink(filepath.Join(tmp, "elsewhere"), filepath.Join(tmp, "photos", "sklearn"))
	if err := fill(photoMeta(true)); err != nil {
		t.Errorf("linked class folder: %v", err)
	}
	os.Remove(filepath.Join(tmp, "photos", "sklearn"))
	// An empty class folder is refused when the folder is opened, named.
	empty := filepath.Join(tmp, "photos", "sklearn")
	os.RemoveAll(empty)
	os.MkdirAll(empty, 0o755)
	os.WriteFile(filepath.Join(empty, "notes.txt"), []byte("not an image"), 0o644)
	if err := fill(photoMeta(true)); err == nil || !strings.Contains(err.Error(), empty+": the class folder holds no images") {
		t.Errorf("empty class: %v", err)
	}
}

// TestBatchLoader checks that the loader gives the batches of an order in
// order (the last one short), that a failing batch's error reaches next,
// and that stopping half way and starting again works.
func TestBatchLoader(t *testing.T) {
	const n, f = 23, 3
	src := &memSource{x: make([]float32, n*f), y: make([]float32, n), features: f, width: 1}
	for i := range src.x {
		src.x[i] = float32(i)
	}
	for i := range src.y {
		src.y[i] = float32(i)
	}
	ds := &dataset{src: src, n: n, features: f, width: 1}
	order := []int{22, 0, 5, 7, 1, 3, 2, 9, 11, 13, 4, 6, 8, 10, 12, 14, 15, 16, 17, 18, 19, 20, 21}
	l := newBatchLoader(ds, 5)
	defer l.stop()
	for round := range 2 {
		l.start(order)
		for s := 0; s < len(order); s += 5 {
			if round == 1 && s == 10 {
				l.stop() // mid-epoch, with batches filled ahead
				break
			}
			rows := min(5, n-s)
			y := make([]float32, 5)
			if err := l.next(make([]float32, 5*f), y); err != nil {
				t.Fatal(err)
			}
			for k := range rows {
				if y[k] != float32(order[s+k]) {
					t.Fatalf("round %d batch at %d: row %d is sample %v, want %d", round, s, k, y[k], order[s+k])
				}
			}
		}
	}
	l.start(order[:5])
	y := make([]float32, 5)
	if err := l.next(make([]float32, 5*f), y); err != nil || y[0] != 22 {
		t.Fatalf("after a stop: %v, first sample %v", err, y[0])
	}
	if err := l.next(make([]float32, 5*f), y); err == nil {
		t.Error("a next beyond the order's batches did not fail")
	}
	// An error of the source reaches next: plain PGMs whose headers pass
	// the check when the folder is opened but whose pixels stop short.
	tmp := t.TempDir()
	os.MkdirAll(filepath.Join(tmp, "a"), 0o755)
	os.MkdirAll(filepath.Join(tmp, "b"), 0o755)
	os.WriteFile(filepath.Join(tmp, "a", "x.pgm"), []byte("P2 4 4 255\n1 2 3\n"), 0o644)
	os.WriteFile(filepath.Join(tmp, "b", "y.pgm"), []byte("P2 4 4 255\n1 2 3\n"), 0o644)
	meta := &Meta{InputShape: []int{4, 4}, Classes: 2}
	s, _, _, err := openImageFolder(meta, tmp, nil)
	if err != nil {
		t.Fatal(err)
	}
	bad := newBatchLoader(&dataset{src: s, n: 2, features: 16, width: 2}, 2)
	defer bad.stop()
	bad.start([]int{0, 1})
	if err := bad.next(make([]float32, 32), make([]float32, 4)); err == nil || !strings.HasPrefix(err.Error(), filepath.Join(tmp, "a", "x.pgm")+": ") {
		t.Errorf("bad image: %v", err)
	}
}
