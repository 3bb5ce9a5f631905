package app

import (
	"flag"
	"fmt"
	"io"
	"strconv"
)

// evalSelection is which samples `eval` runs: the spec's test files (the
// default), its training files, the validation samples a training run
// held out of them, or a pair of IDX files named on the command line.
type evalSelection struct {
	split          string
	images, labels string
	valSplit       float64
	seed           int64
	limit          int
}

// addEvalSelection defines eval's flags for choosing the samples.
func addEvalSelection(fs *flag.FlagSet, d Defaults) *evalSelection {
	s := &evalSelection{}
	fs.StringVar(&s.split, "split", "test", "which samples of --data: `test`, train, or validation (those a training run holds out)")
	fs.StringVar(&s.images, "images", "", "evaluate this IDX images `FILE` instead (with --labels)")
	fs.StringVar(&s.labels, "labels", "", "the IDX labels `FILE` of --images")
	fs.Float64Var(&s.valSplit, "validation-split", d.ValidationSplit, "for --split validation: the training run's held-out fraction `X` (default: the one the weights record)")
	fs.Int64Var(&s.seed, "seed", d.Seed, "for --split validation: the training run's seed `N` (default: the one the weights record)")
	fs.IntVar(&s.limit, "limit", 0, "for --split train or validation: the training run's --limit `N` (0: all; default: the one the weights record)")
	return s
}

// splitMetadata records in trained weights which samples their run trained
// on and held out: its seed, --limit and --validation-split.
func splitMetadata(md map[string]string, o *trainOptions) {
	md["mlbuild.seed"] = strconv.FormatInt(o.seed, 10)
	md["mlbuild.limit"] = strconv.Itoa(o.limit)
	md["mlbuild.validation_split"] = strconv.FormatFloat(o.valSplit, 'g', -1, 64)
}

// adopt takes, for --split train or validation, the seed, --limit and
// --validation-split that the weights' training run recorded (weights and
// checkpoints keep them), so that the validation samples are the ones the
// run held out; a flag given with another value is kept, with a note that
// the samples then differ from the run's (a different seed puts training
// samples in the validation split). Weights without the record change
// nothing.
func (s *evalSelection) adopt(md map[string]string, given map[string]bool, stderr io.Writer) error {
	if s.split != "train" && s.split != "validation" {
		return nil
	}
	for _, f := range []struct {
		flag, key string
		set       func(string) error
		value     func() string
		matters   bool
	}{
		{"seed", "mlbuild.seed", func(v string) (err error) { s.seed, err = strconv.ParseInt(v, 10, 64); return },
			func() string { return strconv.FormatInt(s.seed, 10) }, s.split == "validation"},
		{"limit", "mlbuild.limit", func(v string) (err error) { s.limit, err = strconv.Atoi(v); return },
			func() string { return strconv.Itoa(s.limit) }, true},
		{"validation-split", "mlbuild.validation_split", func(v string) (err error) { s.valSplit, err = strconv.ParseFloat(v, 64); return },
			func() string { return strconv.FormatFloat(s.valSplit, 'g', -1, 64) }, true},
	} {
		kept, ok := md[f.key]
		if !ok || !f.matters {
			continue
		}
		if given[f.flag] {
			// Another --limit for the training images evaluates a part of
			// them, which needs no note; only the validation samples are
			// the run's choice.
			if f.value() != kept && s.split == "validation" {
				fmt.Fprintf(stderr, "note: the weights were trained with --%s %s; evaluating with --%s %s, whose %s samples are not the ones the run held out\n",
					f.flag, kept, f.flag, f.value(), s.split)
			}
			continue
		}
		if err := f.set(kept); err != nil {
			return fmt.Errorf("the weights' metadata %s is %q, not a number", f.key, kept)
		}
	}
	return nil
}

// weightsMetadata is the metadata of the weights eval runs: the file
// --weights names, or the embedded weights.
func weightsMetadata(meta *Meta, path string) (map[string]string, error) {
	if path != "" {
		return readMetadata(path)
	}
	if meta.Embedded == nil {
		return nil, nil
	}
	f, err := readEmbedded(meta)
	if err != nil {
		return nil, err
	}
	return f.Metadata, nil
}

// open checks the selection and opens its samples; indices are the ones
// to evaluate and what names them for the output.
func (s *evalSelection) open(meta *Meta, dir string) (ds *dataset, indices []int, what string, err error) {
	if s.images != "" || s.labels != "" {
		if s.images == "" || s.labels == "" {
			return nil, nil, "", usageError{"--images and --labels go together"}
		}
		if meta.format() != "idx" {
			return nil, nil, "", usageError{fmt.Sprintf("--images and --labels name IDX files, but this model reads %s data: use --data and --split", meta.format())}
		}
		ds, err = openPair(meta, s.images, s.labels)
		if err != nil {
			return nil, nil, "", err
		}
		return ds, allIndices(ds.n), s.images, nil
	}
	if dir == "" {
		return nil, nil, "", usageError{"eval needs --data DIR (or --images FILE and --labels FILE) and --weights FILE"}
	}
	if err := noDataset(meta, "eval --data"); err != nil {
		return nil, nil, "", err
	}
	switch s.split {
	case "test":
		ds, err = openTestSet(meta, dir, meta.rec)
		if err != nil {
			return nil, nil, "", err
		}
		return ds, allIndices(ds.n), "test", nil
	case "train", "validation":
		if s.valSplit < 0 || s.valSplit >= 1 || s.limit < 0 {
			return nil, nil, "", usageError{fmt.Sprintf("--validation-split must be in [0, 1) and --limit not negative, got %v and %d", s.valSplit, s.limit)}
		}
		// The weights carry the preprocessing training fitted; opening the
		// training set fits it again, so keep the one of the weights.
		rec := meta.rec
		ds, err = openTrainSet(meta, dir, s.limit)
		if err != nil {
			return nil, nil, "", err
		}
		if rec != nil {
			ds.rec, meta.rec = rec, rec
		}
		if s.split == "train" {
			return ds, allIndices(ds.n), "train", nil
		}
		_, val := ds.split(s.valSplit, s.seed)
		if len(val) == 0 {
			ds.close()
			return nil, nil, "", usageError{fmt.Sprintf("--split validation holds no samples with --validation-split %v: the weights do not record their run's split; give that run's --validation-split", s.valSplit)}
		}
		return ds, val, "validation", nil
	}
	return nil, nil, "", usageError{fmt.Sprintf("--split must be test, train or validation, got %q", s.split)}
}

func allIndices(n int) []int {
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	return all
}
