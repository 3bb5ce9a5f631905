package app

import (
	"fmt"
	"io"
	"strings"
)

// The texts of `commands` are written for the spec of most programs: IDX
// files in data/mnist, classes to predict. helpFor rewrites them in the
// words of a program's own dataset and task, and hides `sample` (which
// writes an image of IDX files) from a program of another dataset, and
// predict (which takes files of samples) from a text model's, whose
// command is generate.

// showsSample reports whether the program has the sample command: its
// dataset is IDX files.
func showsSample(meta *Meta) bool { return meta.format() == "idx" }

// commandsFor is the commands the program's usage lists.
func commandsFor(meta *Meta) []commandHelp {
	var out []commandHelp
	for _, c := range commands {
		if c.name == "sample" && !showsSample(meta) || c.name == "generate" && meta.generator() == nil || c.name == "predict" && meta.format() == "text" {
			continue
		}
		h, _ := helpFor(meta, c.name)
		out = append(out, h)
	}
	return out
}

// commandNames lists the commands for an unknown-command message.
func commandNames(meta *Meta) string {
	var names []string
	for _, c := range commandsFor(meta) {
		names = append(names, c.name)
	}
	return strings.Join(names, ", ")
}

// helpFor is helpOf in the words of meta's dataset and task; meta nil
// leaves the text as written.
func helpFor(meta *Meta, name string) (commandHelp, bool) {
	h, ok := helpOf(name)
	if !ok || meta == nil {
		return h, ok
	}
	if meta.regression() {
		h.summary = strings.Replace(h.summary, "accuracy and loss of trained weights", "loss, mse, mae and r2 of trained weights", 1)
		h.summary = strings.Replace(h.summary, "the most probable class of", "the predicted values of", 1)
		h.long = strings.Replace(h.long, "Predict prints the most probable class and its probability for each\nINPUT", "Predict prints the predicted values (in the targets' units) for each\nINPUT", 1)
	}
	if meta.format() == "idx" {
		return h, true
	}
	words := []string{
		"the spec's IDX training files", "the spec's training data (" + dataFiles(meta, true) + ")",
		"the spec's IDX test files", "the spec's test data (" + dataFiles(meta, false) + ")",
		"on the test files", "on the test data",
		"data/mnist", "DIR",
	}
	if meta.format() == "csv" {
		words = append(words, "--resize photo.jpg", "--output outputs.npy rows.csv", "digit.png", "rows.csv")
	}
	for _, text := range []*string{&h.summary, &h.long, &h.examples} {
		for i := 0; i < len(words); i += 2 {
			*text = strings.ReplaceAll(*text, words[i], words[i+1])
		}
	}
	return h, true
}

// helpMeta is the output of a command's flag set: it discards what the
// flag package would print and carries the program's metadata to
// printCommandHelp, which words the help for its dataset.
type helpMeta struct{ meta *Meta }

func (helpMeta) Write(p []byte) (int, error) { return len(p), nil }

// metaOf is the metadata newFlags gave fs, nil when none.
func metaOf(fs interface{ Output() io.Writer }) *Meta {
	if h, ok := fs.Output().(helpMeta); ok {
		return h.meta
	}
	return nil
}

// sampleRefusal is sample's error in a program of a dataset other than
// IDX files, where usage does not list it.
func sampleRefusal(meta *Meta) error {
	return usageError{fmt.Sprintf("sample writes an image of the spec's IDX files, but this model reads %s data (%s): give predict a file of that data instead", meta.format(), dataFiles(meta, false))}
}

// sampleNoun is what a sample of the program's data is called in rates:
// "img" for images (IDX and image-folder datasets), "rows" for a CSV
// table, "samples" for arrays.
func (m *Meta) sampleNoun() string {
	switch m.format() {
	case "idx", "imagefolder":
		return "img"
	case "csv":
		return "rows"
	case "text":
		return "windows"
	}
	return "samples"
}
