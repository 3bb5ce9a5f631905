package emit

import (
	"slices"
	"strings"

	"github.com/mlbuild/mlbuild/spec"
)

// dataReader is one of rt/app's Reader values, with when a program lists
// it in Meta.Readers. A program links only the readers it lists (rt/app
// names none of them itself), so a spec's dataset format decides which
// parsers its binary carries: an IDX model carries no CSV parser and no
// zip reader.
type dataReader struct {
	// value is the Reader in rt/app, e.g. "app.CSV".
	value string
	// imports is the runtime package (under rt/) that value names besides
	// rt/app, "" for none.
	imports string
	// decoders are standard packages that the program imports for their
	// side effect only: image/png and image/jpeg join package image's
	// registry of formats, through which rt/imageio decodes PNG and JPEG
	// files. rt/imageio does not import them, as importing image/png links
	// all of its decoder, so only the programs that read images carry them.
	decoders []string
	// dataset is the dataset format whose splits it opens, "" for none.
	dataset string
	// inputsFor are the dataset formats ("" for a spec without a dataset)
	// whose programs take this reader's files as predict's inputs: images
	// for models of images, CSV files for models of feature rows, .npy
	// arrays for every model (predict --output writes them).
	inputsFor []string
}

// dataReaders are the readers, in the order predict asks them about a file
// (rt/app's IDX reader takes what the others leave, so it comes last).
var dataReaders = []dataReader{
	{value: "app.Images", decoders: imageDecoders, inputsFor: []string{"", "idx", "imagefolder", "npy", "npz"}},
	{value: "app.NPYArrays", inputsFor: []string{"", "idx", "imagefolder", "csv", "npy", "npz"}},
	{value: "app.CSV", dataset: "csv", inputsFor: []string{"", "csv", "npy", "npz"}},
	{value: "app.NPY", dataset: "npy"},
	{value: "app.NPZ(npz.Open)", imports: "npz", dataset: "npz"}, // archive/zip only where needed
	{value: "app.ImageFolder", decoders: imageDecoders, dataset: "imagefolder"},
	{value: "app.Text", dataset: "text"},    // also generate, and the tokenizer
	{value: "app.IDXFiles", dataset: "idx"}, // also a spec's without a dataset block (eval --images)
	{value: "app.IDX", inputsFor: []string{"", "idx", "imagefolder", "npy", "npz"}},
}

// imageDecoders are the standard decoders of the image files that rt/imageio
// reads besides its own Netpbm ones.
var imageDecoders = []string{"image/jpeg", "image/png"}

// readers are the readers a spec's program needs.
func readers(ds spec.Dataset) []dataReader {
	format := ds.Format
	if format == "" { // no dataset block: the IDX files of eval's --images
		format = "idx"
	}
	var out []dataReader
	for _, r := range dataReaders {
		if (r.dataset != "" && r.dataset == format) || slices.Contains(r.inputsFor, ds.Format) {
			out = append(out, r)
		}
	}
	return out
}

// readersFor lists the readers a spec's program needs, as a Go slice of
// rt/app values.
func readersFor(ds spec.Dataset) string {
	var values []string
	for _, r := range readers(ds) {
		values = append(values, r.value)
	}
	return "[]*app.Reader{" + strings.Join(values, ", ") + "}"
}

// readerImports are the import paths that the readers of a spec's program
// need besides rt/app.
func readerImports(ds spec.Dataset) []string {
	var out []string
	for _, r := range readers(ds) {
		if r.imports != "" {
			out = append(out, ModulePath+"/rt/"+r.imports)
		}
	}
	return out
}

// readerDecoders are the standard packages that a spec's program imports
// for the decoders they register (see dataReader.decoders), each once.
func readerDecoders(ds spec.Dataset) []string {
	var out []string
	for _, r := range readers(ds) {
		for _, d := range r.decoders {
			if !slices.Contains(out, d) {
				out = append(out, d)
			}
		}
	}
	return out
}
