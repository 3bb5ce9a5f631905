package npy

import (
	"archive/zip"
	"fmt"
	"io"
	"sort"
	"strings"
)

// MaxNPZEntry bounds the decompressed size of one array of an .npz
// archive, which is read into memory (a zip entry cannot be mapped).
const MaxNPZEntry = 1 << 32

// OpenNPZ reads the array called name (the keyword numpy.savez gave it,
// "arr_0" for the first positional one) from an .npz archive, compressed
// or not, into memory.
func OpenNPZ(path, name string) (*Array, error) {
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
		if f.UncompressedSize64 > MaxNPZEntry {
			return nil, fmt.Errorf("%s: %d bytes is too large to read into memory; save it with numpy.save as its own .npy file, which is memory-mapped", where, f.UncompressedSize64)
		}
		r, err := f.Open()
		if err != nil {
			return nil, fmt.Errorf("%s: %v", where, err)
		}
		data, err := io.ReadAll(io.LimitReader(r, MaxNPZEntry+1))
		r.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %v", where, err)
		}
		return Parse(where, data)
	}
	sort.Strings(names)
	return nil, fmt.Errorf("%s: the archive has no array %q; it has %s", path, name, strings.Join(names, ", "))
}
