package npz

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/rt/npy"
)

// member is one entry of an archive that writeArchive writes.
type member struct {
	name string
	data []byte
	zero int // zero bytes appended to data, deflated as they are written
}

func writeArchive(t *testing.T, members ...member) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "a.npz")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for _, m := range members {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: m.name, Method: zip.Deflate})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(m.data)
		zeros := make([]byte, 1<<20)
		for left := m.zero; left > 0; left -= len(zeros) {
			w.Write(zeros[:min(left, len(zeros))])
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return path
}

// npyOf encodes a float32 array of shape.
func npyOf(t *testing.T, shape ...int) []byte {
	t.Helper()
	n := 1
	for _, d := range shape {
		n *= d
	}
	var b bytes.Buffer
	if err := npy.Encode(&b, shape, make([]float32, n)); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// headerOnly is the header of a float32 array of shape, without its data.
func headerOnly(t *testing.T, shape ...int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := npy.Encode(&b, []int{0}, nil); err != nil {
		t.Fatal(err)
	}
	h := b.Bytes()
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = fmt.Sprint(d)
	}
	text := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%s,), }", strings.Join(dims, ", "))
	text += strings.Repeat(" ", len(h)-10-len(text)-1) + "\n"
	if len(text) != len(h)-10 {
		t.Fatalf("the header of shape %v does not fit in %d bytes", shape, len(h)-10)
	}
	return append(h[:10:10], text...)
}

func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestInflationBounded: an array is inflated only as far as its header's
// shape, checked first, declares: a member whose 32 bytes of data are
// followed by 64 MiB of zeros (64 KiB deflated) is refused at the first
// byte more, and a header whose shape the caller's check refuses, or that
// declares more than MaxEntry bytes, is refused before any data is
// inflated. Each costs well under 1 MiB; the archive member was read whole
// (up to 4 GiB) before any check.
func TestInflationBounded(t *testing.T) {
	bomb := writeArchive(t, member{name: "x.npy", data: npyOf(t, 2, 4), zero: 64 << 20})
	huge := writeArchive(t, member{name: "x.npy", data: headerOnly(t, 1<<31, 4), zero: 64 << 20})
	rows4 := func(shape []int, _ int) error {
		if len(shape) != 2 || shape[1] != 4 {
			return errors.New("want rows of 4 values")
		}
		return nil
	}
	for _, c := range []struct {
		path  string
		check func([]int, int) error
		want  string
	}{
		{bomb, nil, "a.npz[x]: more bytes follow the 32 bytes of data that shape (2, 4) of float32 needs"},
		{huge, nil, "a.npz[x]: shape (2147483648, 4) of float32 takes 34359738368 bytes, more than the 4294967296"},
		{huge, func([]int, int) error { return errors.New("the model takes 3 values per sample") }, "a.npz[x]: the model takes 3 values per sample"},
		{huge, rows4, "more than the 4294967296"},
	} {
		var err error
		got := allocated(func() { _, err = Open(c.path, "x", c.check) })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", filepath.Base(c.path), err, c.want)
		}
		if got > 1<<20 {
			t.Errorf("%s: refusing it allocated %d bytes", c.want, got)
		}
	}
	// An honest array reads, and its check sees its shape.
	ok := writeArchive(t, member{name: "x.npy", data: npyOf(t, 3, 4)})
	a, err := Open(ok, "x", rows4)
	if err != nil || a.ShapeText() != "(3, 4)" {
		t.Errorf("an honest archive: %v", err)
	}
}

// TestDuplicateMembers: two members of one name (or "x" and "x.npy", the
// same key to NumPy) are refused: NumPy reads the last, this reader read
// the first.
func TestDuplicateMembers(t *testing.T) {
	for _, names := range [][2]string{{"x.npy", "x.npy"}, {"x", "x.npy"}} {
		path := writeArchive(t, member{name: names[0], data: npyOf(t, 2, 4)}, member{name: "y.npy", data: npyOf(t, 2)}, member{name: names[1], data: npyOf(t, 3, 4)})
		if _, err := Open(path, "x", nil); err == nil || !strings.Contains(err.Error(), fmt.Sprintf(`a.npz: the archive holds two members named "x" (%s and %s)`, names[0], names[1])) {
			t.Errorf("%v: got %v", names, err)
		}
		if _, err := Open(path, "y", nil); err != nil {
			t.Errorf("%v: the other array: %v", names, err)
		}
	}
}
