package npy

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/rt/csvdata"
)

// TestNumPyFiles reads the arrays that NumPy's own tests ship (see
// testdata/README.md).
func TestNumPyFiles(t *testing.T) {
	for _, name := range []string{"python3.npy", "win64python2.npy"} {
		a, err := Open(filepath.Join("testdata", name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if a.Dtype.Name != "float64" || len(a.Shape) != 1 || a.Shape[0] != 2 || a.At(0) != 1 || a.At(1) != 1 {
			t.Errorf("%s: %s %v %v %v", name, a.Dtype.Name, a.Shape, a.At(0), a.At(1))
		}
		dst := make([]float32, 2)
		a.Gather(dst, []int{1, 0})
		if dst[0] != 1 || dst[1] != 1 {
			t.Errorf("%s: gathered %v", name, dst)
		}
		a.Close()
	}
	_, err := Open(filepath.Join("testdata", "py3-objarr.npy"))
	if err == nil || !strings.Contains(err.Error(), `py3-objarr.npy: element type "|O8" is not supported: object arrays`) {
		t.Errorf("object array: %v", err)
	}
}

// irisX reads the features of scikit-learn's iris.csv (`make data`).
func irisX(t *testing.T) *csvdata.Table {
	dir := os.Getenv("MLBUILD_SKLEARN_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "data", "sklearn")
	}
	tb, err := csvdata.Read(filepath.Join(dir, "iris.csv"), csvdata.Options{SkipRows: 1, Labels: []csvdata.Column{{Index: -1}}})
	if err != nil {
		t.Fatalf("the scikit-learn data sets are needed (run `make data` or set MLBUILD_SKLEARN_DIR): %v", err)
	}
	return tb
}

// TestRoundTrip writes iris's features and reads them back, small (read
// into memory) and repeated past the mapping threshold (mapped).
func TestRoundTrip(t *testing.T) {
	tb := irisX(t)
	for _, reps := range []int{1, 600} {
		var x []float32
		for i := 0; i < reps; i++ {
			x = append(x, tb.X...)
		}
		rows := tb.Rows * reps
		path := filepath.Join(t.TempDir(), "iris.npy")
		if err := Write(path, []int{rows, tb.Features}, x); err != nil {
			t.Fatal(err)
		}
		raw, _ := os.ReadFile(path)
		if i := bytes.IndexByte(raw, '\n'); (i+1)%64 != 0 {
			t.Errorf("data starts at byte %d, not a multiple of 64", i+1)
		}
		a, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if (a.unmap != nil) != (len(raw) >= mapThreshold) {
			t.Errorf("%d bytes: mapped %v", len(raw), a.unmap != nil)
		}
		if a.Rows() != rows || a.RowSize() != 4 || a.ShapeText() != "("+strconv.Itoa(rows)+", 4)" {
			t.Fatalf("shape %v", a.Shape)
		}
		got := make([]float32, 8)
		a.Gather(got, []int{rows - 1, 0})
		want := append(append([]float32(nil), tb.X[len(tb.X)-4:]...), tb.X[:4]...)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("reps %d: gathered %v, want %v", reps, got, want)
			}
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestIntegerTypes stores iris's class labels as each element type the
// reader takes and reads them back.
func TestIntegerTypes(t *testing.T) {
	tb := irisX(t)
	cls, _, err := tb.Classes(3, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, dt := range dtypes {
		var body bytes.Buffer
		for _, c := range cls {
			switch dt.Name {
			case "float32":
				binary.Write(&body, binary.LittleEndian, float32(c))
			case "float64":
				binary.Write(&body, binary.LittleEndian, float64(c))
			case "uint8":
				body.WriteByte(byte(c))
			case "int32":
				binary.Write(&body, binary.LittleEndian, int32(c))
			case "int64":
				binary.Write(&body, binary.LittleEndian, int64(c))
			}
		}
		dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%d,), }\n", dt.Descr, len(cls))
		file := append([]byte(Magic+"\x01\x00"), byte(len(dict)), byte(len(dict)>>8))
		file = append(append(file, dict...), body.Bytes()...)
		a, err := Parse("labels.npy", file)
		if err != nil {
			t.Fatalf("%s: %v", dt.Name, err)
		}
		if a.IsInteger() != (dt.Name != "float32" && dt.Name != "float64") {
			t.Errorf("%s: IsInteger %v", dt.Name, a.IsInteger())
		}
		for i, c := range cls {
			if a.At(i) != float64(c) {
				t.Fatalf("%s: element %d is %v, want %d", dt.Name, i, a.At(i), c)
			}
		}
	}
}

// TestBadFiles damages a real array and checks each error.
func TestBadFiles(t *testing.T) {
	good, err := os.ReadFile(filepath.Join("testdata", "python3.npy"))
	if err != nil {
		t.Fatal(err)
	}
	repl := func(old, new string) []byte { return bytes.Replace(good, []byte(old), []byte(new), 1) }
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"truncated", good[:len(good)-3], "x.npy: the file is cut short: shape (2,) of float64 needs 16 bytes of data but 13 follow the header"},
		{"trailing", append(append([]byte(nil), good...), 0), "1 bytes follow the 16 bytes of data"},
		{"fortran", repl("'fortran_order': False, 'shape': (2,)", "'fortran_order': True , 'shape': (1,2)"), "Fortran (column-major) order; save it in C order"},
		{"big endian", repl("<f8", ">f8"), `element type ">f8" is not supported: the array is big-endian`},
		{"complex", repl("<f8", "<c8"), `element type "<c8" is not supported: use float32`},
		{"not npy", []byte("P5\n28 28\n255\n"), "x.npy: not a NumPy .npy file"},
		{"version", repl("\x01\x00F", "\x04\x00F"), "format version 4.0 is not supported"},
		{"header length", repl("\x01\x00F\x00", "\x01\x00\xff\x00"), "the header claims 255 bytes but the file ends after"},
		{"bad shape", repl("(2,)", "(x,)"), `header: shape: size "x" is not a size`},
		{"missing key", repl("'shape'", "'shap3'"), `header: unknown key "shap3"`},
		{"empty", []byte{}, "not a NumPy .npy file"},
	}
	for _, c := range cases {
		_, err := Parse("x.npy", c.data)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}

// TestMarked: WriteMarked's files read like Write's (the mark is blanks
// at the end of the header's padding, the data still 64-byte aligned)
// and IsMarked tells them from Write's.
func TestMarked(t *testing.T) {
	dir := t.TempDir()
	for _, shape := range [][]int{{3, 10}, {1}, {2, 3, 4}, {123456789, 0}} {
		n := 1
		for _, d := range shape {
			n *= d
		}
		data := make([]float32, n)
		for i := range data {
			data[i] = float32(i) / 7
		}
		marked, plain := filepath.Join(dir, "m.npy"), filepath.Join(dir, "p.npy")
		if err := WriteMarked(marked, shape, data); err != nil {
			t.Fatal(err)
		}
		if err := Write(plain, shape, data); err != nil {
			t.Fatal(err)
		}
		if !IsMarked(marked) || IsMarked(plain) {
			t.Errorf("%v: IsMarked says %v for the marked file and %v for the plain one", shape, IsMarked(marked), IsMarked(plain))
		}
		a, err := Open(marked)
		if err != nil {
			t.Fatalf("%v: %v", shape, err)
		}
		b, _ := os.ReadFile(marked)
		if start := len(b) - 4*n; start%64 != 0 || a.ShapeText() != shapeText(shape) || n > 0 && float32(a.At(n-1)) != data[n-1] {
			t.Errorf("%v: data at %d, shape %s", shape, start, a.ShapeText())
		}
		a.Close()
	}
	if IsMarked(filepath.Join(dir, "absent.npy")) {
		t.Error("an absent file is marked")
	}
}
