// Package npz reads the arrays of NumPy's .npz archives (numpy.savez and
// savez_compressed: a zip of .npy files). It is a package of its own, apart
// from rt/npy, because it links archive/zip (and, through zip's registered
// compressors, compress/flate's): a program imports it only when its spec's
// dataset is an npz archive (emit/readers.go).
//
// An archive's arrays are read into memory (a zip entry cannot be mapped),
// so their memory is bounded before anything is inflated: each member's
// .npy header is read first and its shape given to the caller's check
// (the program checks it against the model), and then exactly the bytes
// that shape declares are inflated, at most MaxEntry; a member that would
// inflate further is refused at its first byte more.
package npz

import (
	"archive/zip"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/mlbuild/mlbuild/rt/npy"
)

// MaxEntry bounds the data of one array of an .npz archive, which is read
// into memory.
const MaxEntry = 1 << 32

// Open reads the array called name (the keyword numpy.savez gave it,
// "arr_0" for the first positional one) from an .npz archive, compressed
// or not, into memory. check, when not nil, is given the array's shape
// and element size from its header before any data is inflated; its
// error refuses the array. Two members of the same name (which zip
// allows: NumPy reads the last, a reader of the first would disagree
// with it) are refused.
func Open(path, name string, check func(shape []int, elemSize int) error) (*npy.Array, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err // *PathError names the file
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return Read(path, f, fi.Size(), name, check)
}

// Read is Open for an archive of size bytes read through r; path names it
// in messages.
func Read(path string, r io.ReaderAt, size int64, name string, check func(shape []int, elemSize int) error) (*npy.Array, error) {
	z, err := zip.NewReader(r, size)
	if err != nil {
		return nil, fmt.Errorf("%s: not an .npz archive (%v); save arrays with numpy.save", path, err)
	}
	var names []string
	var found *zip.File
	for _, f := range z.File {
		entry := strings.TrimSuffix(f.Name, ".npy")
		names = append(names, entry)
		if entry != name {
			continue
		}
		if found != nil {
			return nil, fmt.Errorf("%s: the archive holds two members named %q (%s and %s); NumPy would read the last and other readers the first: write the archive again with one array of each name", path, name, found.Name, f.Name)
		}
		found = f
	}
	if found == nil {
		sort.Strings(names)
		return nil, fmt.Errorf("%s: the archive has no array %q; it has %s", path, name, strings.Join(names, ", "))
	}
	where := path + "[" + name + "]"
	rc, err := found.Open()
	if err != nil {
		return nil, fmt.Errorf("%s: %v", where, err)
	}
	defer rc.Close()
	return npy.ReadFrom(where, rc, MaxEntry, check)
}
