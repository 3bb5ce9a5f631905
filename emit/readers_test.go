package emit

import (
	"testing"

	"github.com/mlbuild/mlbuild/spec"
)

// TestReadersFor: a program lists the reader of its dataset's format and
// those of predict's inputs for its kind of data, and no other.
func TestReadersFor(t *testing.T) {
	for _, c := range []struct{ format, want string }{
		{"idx", "[]*app.Reader{app.Images, app.NPY, app.IDX}"},
		{"", "[]*app.Reader{app.Images, app.NPY, app.CSV, app.IDX}"},
		{"csv", "[]*app.Reader{app.NPY, app.CSV}"},
		{"npy", "[]*app.Reader{app.Images, app.NPY, app.CSV, app.IDX}"},
		{"npz", "[]*app.Reader{app.Images, app.NPY, app.CSV, app.NPZ, app.IDX}"},
		{"imagefolder", "[]*app.Reader{app.Images, app.NPY, app.ImageFolder, app.IDX}"},
	} {
		if got := readersFor(spec.Dataset{Format: c.format}); got != c.want {
			t.Errorf("format %q: %s, want %s", c.format, got, c.want)
		}
	}
}
