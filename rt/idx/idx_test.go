package idx

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tinyImages is three 4x5 images whose pixels count up from 0 (first image),
// 20 and 40, with 255 in the last pixel of the last image.
func tinyImages() []byte {
	pix := make([]byte, 3*4*5)
	for i := range pix {
		pix[i] = byte(i)
	}
	pix[len(pix)-1] = 255
	return EncodeImages(4, 5, pix)
}

func tinyLabels() []byte { return EncodeLabels([]byte{7, 0, 9}) }

func gzipBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// testdataFiles are the seed files kept in testdata/, made by this test.
func testdataFiles(t testing.TB) map[string][]byte {
	return map[string][]byte{
		"images3.idx":    tinyImages(),
		"labels3.idx":    tinyLabels(),
		"images3.idx.gz": gzipBytes(t, tinyImages()),
		"labels3.idx.gz": gzipBytes(t, tinyLabels()),
	}
}

// TestTestdata keeps testdata/ in step with the generators above; run with
// MLBUILD_UPDATE=1 to rewrite the files.
func TestTestdata(t *testing.T) {
	for name, want := range testdataFiles(t) {
		path := filepath.Join("testdata", name)
		if os.Getenv("MLBUILD_UPDATE") != "" {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with MLBUILD_UPDATE=1 to create it)", err)
		}
		if strings.HasSuffix(name, ".gz") {
			// gzip output may differ between Go versions; compare contents.
			zr, err := gzip.NewReader(bytes.NewReader(got))
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			buf.ReadFrom(zr)
			got = gzipBytes(t, buf.Bytes())
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from its generator; run with MLBUILD_UPDATE=1", path)
		}
	}
}

func TestOpenRawAndGzip(t *testing.T) {
	for _, suffix := range []string{"", ".gz"} {
		t.Run("suffix"+suffix, func(t *testing.T) {
			im, err := OpenImages(filepath.Join("testdata", "images3.idx"+suffix))
			if err != nil {
				t.Fatal(err)
			}
			defer im.Close()
			lb, err := OpenLabels(filepath.Join("testdata", "labels3.idx"+suffix))
			if err != nil {
				t.Fatal(err)
			}
			defer lb.Close()
			if im.N != 3 || im.Rows != 4 || im.Cols != 5 || len(im.Pix) != 60 {
				t.Fatalf("images: N=%d Rows=%d Cols=%d len(Pix)=%d, want 3, 4, 5, 60", im.N, im.Rows, im.Cols, len(im.Pix))
			}
			if lb.N != 3 || !bytes.Equal(lb.Values, []byte{7, 0, 9}) {
				t.Fatalf("labels: N=%d Values=%v", lb.N, lb.Values)
			}
			if err := Pair(im, lb); err != nil {
				t.Fatal(err)
			}
			if err := lb.Check(10); err != nil {
				t.Fatal(err)
			}
			if got := im.Image(1)[0]; got != 20 {
				t.Fatalf("image 1 starts with %d, want 20", got)
			}
			if err := im.Close(); err != nil {
				t.Fatal(err)
			}
			if err := im.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			if im.Pix != nil {
				t.Fatal("Pix still set after Close")
			}
		})
	}
}

// TestGzipDetectedByMagic reads a gzip file whose name says nothing, and a
// raw file named .gz.
func TestGzipDetectedByMagic(t *testing.T) {
	dir := t.TempDir()
	gz := filepath.Join(dir, "plain-name")
	raw := filepath.Join(dir, "lying.gz")
	os.WriteFile(gz, gzipBytes(t, tinyImages()), 0o644)
	os.WriteFile(raw, tinyImages(), 0o644)
	for _, p := range []string{gz, raw} {
		im, err := OpenImages(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if !bytes.Equal(im.Pix, tinyImages()[16:]) {
			t.Fatalf("%s: wrong pixels", p)
		}
		im.Close()
	}
}

func TestBatchAndOneHot(t *testing.T) {
	im, err := ParseImages("mem", tinyImages())
	if err != nil {
		t.Fatal(err)
	}
	lb, err := ParseLabels("mem", tinyLabels())
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]float32, 2*20)
	im.Batch(dst, []int{2, 0})
	if dst[0] != 40.0/255 || dst[19] != 1 || dst[20] != 0 || dst[21] != 1.0/255 {
		t.Fatalf("Batch: got %v %v %v %v", dst[0], dst[19], dst[20], dst[21])
	}
	for _, v := range dst {
		if v < 0 || v > 1 {
			t.Fatalf("pixel %v outside [0, 1]", v)
		}
	}
	hot := make([]float32, 2*10)
	for i := range hot {
		hot[i] = 5 // OneHot must clear what was there
	}
	lb.OneHot(hot, []int{2, 0}, 10)
	want := make([]float32, 20)
	want[9], want[10+7] = 1, 1
	for i := range want {
		if hot[i] != want[i] {
			t.Fatalf("OneHot = %v, want %v", hot, want)
		}
	}
}

func TestBatchPanicsOnWrongLength(t *testing.T) {
	im, _ := ParseImages("mem", tinyImages())
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "needs 40 floats") {
			t.Fatalf("recovered %v, want a message about the length", r)
		}
	}()
	im.Batch(make([]float32, 39), []int{0, 1})
}

func TestCheckAndPair(t *testing.T) {
	lb, _ := ParseLabels("labels.idx", EncodeLabels([]byte{1, 12, 3, 10}))
	err := lb.Check(10)
	if err == nil {
		t.Fatal("no error for labels 12 and 10 with 10 classes")
	}
	for _, want := range []string{"labels.idx", "label 12 (sample 1)", "10 classes (0..9)", "2 of 4"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if err := lb.Check(13); err != nil {
		t.Errorf("Check(13): %v", err)
	}
	im, _ := ParseImages("images.idx", tinyImages())
	err = Pair(im, lb)
	if err == nil {
		t.Fatal("no error for 3 images and 4 labels")
	}
	for _, want := range []string{"images.idx holds 3 images", "labels.idx holds 4 labels"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func header(magic uint32, dims ...uint32) []byte {
	b := binary.BigEndian.AppendUint32(nil, magic)
	for _, d := range dims {
		b = binary.BigEndian.AppendUint32(b, d)
	}
	return b
}

// TestOpenErrors opens broken files and checks that each error names the
// file and says what is wrong.
func TestOpenErrors(t *testing.T) {
	images := tinyImages()
	corruptGzip := gzipBytes(t, images)
	corruptGzip[len(corruptGzip)/2] ^= 0xff
	corruptGzip[len(corruptGzip)/2+1] ^= 0xff
	tests := []struct {
		name   string
		data   []byte
		labels bool // open as labels instead of images
		want   []string
	}{
		{"empty", nil, false, []string{"truncated", "has 0 bytes"}},
		{"two bytes", []byte{0, 0}, true, []string{"truncated", "has 2 bytes"}},
		{"png", []byte("\x89PNG\r\n\x1a\n...."), false, []string{"not an IDX file", "PNG image", "89 50 4e 47"}},
		{"html", []byte("<!DOCTYPE html>"), true, []string{"not an IDX file", "HTML"}},
		{"labels as images", tinyLabels(), false, []string{"magic 0x00000801", "this looks like a labels file", "expected an images file (magic 0x00000803"}},
		{"images as labels", images, true, []string{"magic 0x00000803", "this looks like an images file", "expected a labels file"}},
		{"float images", append(header(0x00000D03, 1, 1, 1), 0, 0, 0, 0), false, []string{"float32 elements", "only unsigned bytes"}},
		{"unknown type", header(0x00000701, 1), true, []string{"unknown element type (0x07)"}},
		{"2-d", header(0x00000802, 2, 2), false, []string{"2 dimensions", "expected an images file"}},
		{"short header", header(MagicImages, 3, 4), false, []string{"truncated", "header of an images file is 16 bytes", "has 12"}},
		{"truncated data", images[:70], false, []string{"truncated", "3 images of 4x5 pixels", "needs 76 bytes", "has 70"}},
		{"trailing data", append(tinyLabels(), 1), true, []string{"3 labels", "needs 11 bytes", "trailing data after the last label"}},
		{"absurd count", header(MagicLabels, 0xFFFFFFFF), true, []string{"4294967295 labels", "more than the 2147483647 elements"}},
		{"absurd product", header(MagicImages, 60000, 65536, 65536), false, []string{"60000 images of 65536x65536", "corrupt"}},
		{"zero rows", header(MagicImages, 5, 0, 28), false, []string{"images of 0x28 pixels", "at least one pixel"}},
		{"gzip truncated data", gzipBytes(t, images[:50]), false, []string{"truncated", "needs 76 bytes", "decompressed file has 50"}},
		{"gzip cut short", gzipBytes(t, images)[:30], false, []string{"truncated"}},
		{"gzip corrupt", corruptGzip, false, []string{"gzip"}},
		{"gzip not gzip", []byte{0x1f, 0x8b, 1, 2, 3}, false, []string{"corrupt gzip data"}},
		{"gzip labels as images", gzipBytes(t, tinyLabels()), false, []string{"this looks like a labels file"}},
		{"gzip trailing data", gzipBytes(t, append(tinyImages(), 9, 9)), false, []string{"trailing data after the last image", "decompressed"}},
		{"gzip absurd", gzipBytes(t, header(MagicImages, 1<<30, 1<<10, 1<<10)), false, []string{"more than the 2147483647 elements"}},
	}
	dir := t.TempDir()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-")+".idx")
			if err := os.WriteFile(path, tt.data, 0o644); err != nil {
				t.Fatal(err)
			}
			var err error
			if tt.labels {
				var lb *Labels
				if lb, err = OpenLabels(path); err == nil {
					lb.Close()
				}
			} else {
				var im *Images
				if im, err = OpenImages(path); err == nil {
					im.Close()
				}
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, want := range append([]string{path}, tt.want...) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

func TestOpenNotAFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := OpenImages(dir); err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "directory") {
		t.Errorf("directory: got %v", err)
	}
	missing := filepath.Join(dir, "missing")
	if _, err := OpenLabels(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: got %v", err)
	}
}

// TestOpenHugeFile opens a sparse file larger than any valid labels file;
// the error must give the real size without reading it.
func TestOpenHugeFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "huge.idx")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(header(MagicLabels, 10))
	if err := f.Truncate(1<<31 + 100); err != nil {
		f.Close()
		t.Skipf("cannot make a sparse file here: %v", err)
	}
	f.Close()
	_, err = OpenLabels(path)
	if err == nil || !strings.Contains(err.Error(), "needs 18 bytes") || !strings.Contains(err.Error(), "2147483748") || !strings.Contains(err.Error(), "trailing data") {
		t.Fatalf("got %v", err)
	}
}
