// Package npz reads the arrays of NumPy's .npz archives (numpy.savez and
// savez_compressed: a zip of .npy files). It is a package of its own, apart
// from rt/npy, because it links archive/zip (and, through zip's registered
// compressors, compress/flate's): a program imports it only when its spec's
// dataset is an npz archive (emit/readers.go).
package npz

import (
	"archive/zip"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/mlbuild/mlbuild/rt/npy"
)

// MaxEntry bounds the decompressed size of one array of an .npz
// archive, which is read into memory (a zip entry cannot be mapped).
const MaxEntry = 1 << 32

// Open reads the array called name (the keyword numpy.savez gave it,
// "arr_0" for the first positional one) from an .npz archive, compressed
// or not, into memory.
func Open(path, name string) (*npy.Array, error) {
	z, err := zip.OpenReader(path)
	if err != nil {
		return nil, fmt.Errorf("%s: not an .npz archive (%v); save arrays with numpy.savez", path, err)
	}
	defer z.Close()
	var names []string
	for _, f := range z.File {
		entry := strings.TrimSuffix(f.Name, ".npy")
		names = append(names, entry)
		if entry != name {
			continue
		}
		where := path + "[" + name + "]"
		if f.UncompressedSize64 > MaxEntry {
			return nil, fmt.Errorf("%s: %d bytes is too large to read into memory; save it with numpy.save as its own .npy file, which is memory-mapped", where, f.UncompressedSize64)
		}
		r, err := f.Open()
		if err != nil {
			return nil, fmt.Errorf("%s: %v", where, err)
		}
		data, err := io.ReadAll(io.LimitReader(r, MaxEntry+1))
		r.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %v", where, err)
		}
		return npy.Parse(where, data)
	}
	sort.Strings(names)
	return nil, fmt.Errorf("%s: the archive has no array %q; it has %s", path, name, strings.Join(names, ", "))
}
