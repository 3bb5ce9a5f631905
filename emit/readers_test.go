package emit

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/spec"
)

// TestReadersFor: a program lists the reader of its dataset's format and
// those of predict's inputs for its kind of data, and no other.
func TestReadersFor(t *testing.T) {
	for _, c := range []struct{ format, want string }{
		{"idx", "[]*app.Reader{app.Images, app.NPYArrays, app.IDXFiles, app.IDX}"},
		{"", "[]*app.Reader{app.Images, app.NPYArrays, app.CSV, app.IDXFiles, app.IDX}"},
		{"csv", "[]*app.Reader{app.NPYArrays, app.CSV}"},
		{"npy", "[]*app.Reader{app.Images, app.NPYArrays, app.CSV, app.NPY, app.IDX}"},
		{"npz", "[]*app.Reader{app.Images, app.NPYArrays, app.CSV, app.NPZ(npz.Open), app.IDX}"},
		{"imagefolder", "[]*app.Reader{app.Images, app.NPYArrays, app.ImageFolder, app.IDX}"},
		{"text", "[]*app.Reader{app.Text}"}, // no predict inputs: generate takes text
	} {
		ds := spec.Dataset{Format: c.format}
		if got := readersFor(ds); got != c.want {
			t.Errorf("format %q: %s, want %s", c.format, got, c.want)
		}
		wantImports := 0
		if c.format == "npz" {
			wantImports = 1
		}
		if imps := readerImports(ds); len(imps) != wantImports || wantImports == 1 && imps[0] != "mlbuildprog/rt/npz" {
			t.Errorf("format %q: imports %q", c.format, imps)
		}
		// The image decoders (about 150 KB of a binary) go only into the
		// programs that read images.
		wantDecoders := "[image/jpeg image/png]"
		if c.format == "csv" || c.format == "text" {
			wantDecoders = "[]"
		}
		if got := fmt.Sprint(readerDecoders(ds)); got != wantDecoders {
			t.Errorf("format %q: decoders %s, want %s", c.format, got, wantDecoders)
		}
	}
}

// TestTextDataSpec: a text dataset's files, token mode and documents
// separator reach the program's DataSpec, and its held-out fraction its
// TestSplit.
func TestTextDataSpec(t *testing.T) {
	g := &mainFile{}
	g.renderDataSpec(spec.Dataset{Format: "text", Task: "classification", Files: []string{"moby-dick.txt", "a\"b.txt"}, Tokens: "byte", TestSplit: 0.1})
	got := g.buf.String()
	for _, want := range []string{`Format: "text"`, `Files: []string{"moby-dick.txt", "a\"b.txt"}, Tokens: "byte",`, "TestSplit: 0.1,"} {
		if !strings.Contains(got, want) {
			t.Errorf("DataSpec lacks %s:\n%s", want, got)
		}
	}
	if strings.Contains(got, "Documents") {
		t.Errorf("DataSpec of a text without documents names them:\n%s", got)
	}
	g = &mainFile{}
	g.renderDataSpec(spec.Dataset{Format: "text", Task: "classification", Files: []string{"moby-dick.txt"}, Tokens: "char", Documents: "\n\n"})
	if got := g.buf.String(); !strings.Contains(got, `Documents: "\n\n",`) {
		t.Errorf("DataSpec lacks the documents separator:\n%s", got)
	}
}
