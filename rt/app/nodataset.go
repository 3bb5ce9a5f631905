package app

import "fmt"

// noDataset explains, before train, eval or sample look for files, that
// the program was compiled from a spec without a dataset block and so
// knows no file names to read in --data (the alternative was a baffling
// "data/mnist: is a directory, not an IDX images file").
func noDataset(meta *Meta, command string) error {
	if meta.format() != "idx" || meta.Defaults.TrainImages != "" {
		return nil
	}
	return usageError{fmt.Sprintf("%s needs the data files that a spec's dataset block names, and %s has none: add a dataset block to the spec (the file names inside the --data folder, the classes and the image shape; docs/specs.md, section Dataset) and compile again; predict, bench and info work without one", command, meta.SpecFile)}
}
