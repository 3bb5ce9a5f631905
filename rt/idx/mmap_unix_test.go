//go:build linux || darwin

package idx

import (
	"path/filepath"
	"testing"
)

// TestRawFilesAreMapped checks that raw files are memory-mapped here (they
// have a release function) and gzip files are not.
func TestRawFilesAreMapped(t *testing.T) {
	raw, err := OpenImages(filepath.Join("testdata", "images3.idx"))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if raw.release == nil {
		t.Error("raw file was read, not mapped")
	}
	gz, err := OpenImages(filepath.Join("testdata", "images3.idx.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer gz.Close()
	if gz.release != nil {
		t.Error("gzip file has a mapping to release")
	}
}
