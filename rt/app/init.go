package app

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/mlbuild/mlbuild/rt/safetensors"
)

// A training run starts from one of three sets of weights, which
// `train --init` chooses:
//
//   - the seed's initialisation (the spec's init rules drawn with --seed):
//     what a program without embedded weights does, and --init seed;
//   - the weights of a file, --init FILE: a weights file (train's --out,
//     `mlbuild import`'s NAME.safetensors, a PyTorch state_dict saved as
//     safetensors) or a checkpoint, of which only the weights are taken;
//   - the weights compiled into the program (`mlbuild compile --weights`):
//     what such a program does by default, and --init embedded.
//
// Every one starts a new run: epoch 1, step 1, the learning-rate schedule
// from its start, and a fresh optimizer state (zero moments). That is the
// difference from --resume, which continues an interrupted run with its
// weights, optimizer state, position and settings; the two exclude each
// other. A run from weights keeps the standardisation and normalisation
// the weights were trained with when their file records them (keepPreprocessing); otherwise
// the preprocessing the spec asks for is fitted on the training data, as
// in any run.

// initUsage is the help of --init.
func initUsage(meta *Meta) string {
	if e := meta.Embedded; e != nil {
		return "start from the weights in `FILE` (safetensors, or a checkpoint's weights) with a fresh optimizer state; 'seed': from the seed's initialisation (default: the embedded " + e.Source + ")"
	}
	return "start from the weights in `FILE` (safetensors, or a checkpoint's weights) with a fresh optimizer state, not from the seed's initialisation"
}

// checkInit checks --init against --resume and the program before any
// data is read.
func checkInit(meta *Meta, o *trainOptions) error {
	switch {
	case o.init != "" && o.resume != "":
		return usageError{"--init and --resume exclude each other: --resume continues an interrupted run (its weights, optimizer state, epoch and settings); --init starts a new run from weights, with a fresh optimizer state"}
	case o.reinit != "" && (o.init == "" && meta.Embedded == nil || o.init == "seed"):
		return usageError{"--reinit starts some layers afresh in a run that starts from weights: give --init FILE (or a program's embedded weights) with it"}
	case o.reinit != "":
		if _, err := reinitLayers(meta, o.reinit); err != nil {
			return err
		}
		if o.init == "" || o.init == "embedded" {
			return nil
		}
	case o.init == "embedded" && meta.Embedded == nil:
		return usageError{"--init embedded: this program has no embedded weights (mlbuild compile --weights FILE embeds them); give --init a safetensors FILE"}
	case o.init == "" || o.init == "seed" || o.init == "embedded":
		return nil
	}
	if fi, err := os.Stat(o.init); err != nil {
		return fmt.Errorf("--init: %v", err)
	} else if fi.IsDir() {
		return usageError{fmt.Sprintf("--init %s is a folder; give a safetensors file of weights", o.init)}
	}
	return nil
}

// checkInitKept refuses an --out or --checkpoint that is the file --init
// reads (without --force): the run would replace the weights it started
// from at its first epoch.
func checkInitKept(o *trainOptions) error {
	if o.init == "" || o.init == "seed" || o.init == "embedded" || o.force {
		return nil
	}
	from, err := os.Stat(o.init)
	if err != nil {
		return nil // startWeights reports it
	}
	for _, f := range []struct{ name, path string }{{"out", o.out}, {"checkpoint", o.checkpoint}} {
		if to, err := os.Stat(f.path); err == nil && os.SameFile(from, to) {
			return usageError{fmt.Sprintf("--%s %s is the file --init reads: training would replace the weights it starts from; choose another --%s, or pass --force", f.name, f.path, f.name)}
		}
	}
	return nil
}

// startWeights fills the state arena for a new run as --init says (see the
// comment at the top of this file). It returns the line that tells the
// user which weights the run starts from ("" for the seed's initialisation
// of a program without embedded weights, the usual case) and the weights
// file read (nil for the seed's initialisation).
func startWeights(m Model, o *trainOptions) (string, *safetensors.File, error) {
	meta := m.Meta()
	e := meta.Embedded
	from := o.init
	if from == "" {
		from = "seed"
		if e != nil {
			from = "embedded"
		}
	}
	if from == "seed" {
		initParams(m, o.seed)
		if e != nil {
			return fmt.Sprintf("starting from the seed's initialisation (--seed %d), not from the embedded weights %s", o.seed, e.Source), nil, nil
		}
		return "", nil, nil
	}
	var f *safetensors.File
	var err error
	if from == "embedded" {
		f, err = readEmbedded(meta)
	} else {
		f, err = safetensors.Read(from)
	}
	if err != nil {
		return "", nil, fmt.Errorf("--init: %v", err)
	}
	clear(m.State()) // gradients and optimizer state start at zero
	if o.reinit != "" {
		fresh, err := reinitLayers(meta, o.reinit)
		if err != nil {
			return "", nil, err
		}
		initParams(m, o.seed)
		if err := copyWeightsExcept(m, f, false, fresh); err != nil {
			return "", nil, fmt.Errorf("--init: %v", err)
		}
		return fmt.Sprintf("starting from the weights in %s with a fresh optimizer state, layers %s from the seed's initialisation (--seed %d)", initName(from, e), o.reinit, o.seed), f, nil
	}
	if err := copyWeights(m, f, false); err != nil {
		if layers := mismatchedLayers(meta, f); len(layers) > 0 {
			return "", nil, fmt.Errorf("--init: %v\n(to start these layers from the seed's initialisation instead, a new head for instance, pass --reinit %s)", err, strings.Join(layers, ","))
		}
		return "", nil, fmt.Errorf("--init: %v", err)
	}
	switch {
	case from == "embedded":
		return fmt.Sprintf("starting from the embedded weights (%s, sha256 %s…) with a fresh optimizer state; --init seed starts from the seed's initialisation instead", e.Source, e.shortHash()), f, nil
	case isCheckpoint(f):
		return fmt.Sprintf("starting a new run from the weights of the checkpoint %s, with a fresh optimizer state at epoch 1 (--resume %s would continue its run instead)", from, from), f, nil
	}
	return fmt.Sprintf("starting from the weights in %s with a fresh optimizer state", from), f, nil
}

// keepPreprocessing makes a run started from weights (f) read its data
// as the weights were trained to: with the standardisation and channel
// normalisation that f records, in place of the ones just fitted on the
// training data
// (the first layer is tuned to them; refitting on other data, or a
// --limit, would shift every input). Statistics f lacks (an imported
// model's weights) stay fitted. String classes must come in the order the
// weights' outputs have. It reports whether f's statistics are used.
func keepPreprocessing(meta *Meta, ds *dataset, f *safetensors.File) (bool, error) {
	fitted := ds.rec
	if f == nil || fitted == nil {
		return false, nil // IDX data: nothing is fitted
	}
	// Read what f holds, none of it required.
	lenient := *meta
	lenient.Data.Standardize, lenient.Data.StandardizeTargets, lenient.Data.Normalize = false, false, false
	kept, err := readRecord(&lenient, f.Path, f.Metadata)
	if err != nil {
		return false, fmt.Errorf("--init: %v", err)
	}
	if kept.classNames != nil && fitted.classNames != nil && !slices.Equal(kept.classNames, fitted.classNames) {
		return false, fmt.Errorf("--init %s: the weights' outputs are the classes %q, but the training data gives %q: train from weights of this data's classes, or without --init", f.Path, kept.classNames, fitted.classNames)
	}
	used := kept.mean != nil || kept.tmean != nil || kept.cmean != nil
	if kept.cmean == nil {
		kept.cmean, kept.cstd = fitted.cmean, fitted.cstd
	}
	if kept.mean == nil {
		kept.mean, kept.std = fitted.mean, fitted.std
	}
	if kept.tmean == nil {
		kept.tmean, kept.tstd = fitted.tmean, fitted.tstd
	}
	if kept.classNames == nil {
		kept.classNames = fitted.classNames
	}
	ds.rec, meta.rec = kept, kept
	return used, nil
}

// initName is how messages name the weights a run starts from.
func initName(from string, e *EmbeddedWeights) string {
	if from == "embedded" && e != nil {
		return "the embedded " + e.Source
	}
	return from
}

// layerOf is the layer of a param: its name without the last part
// ("fc.weight" -> "fc").
func layerOf(param string) string {
	if i := strings.LastIndexByte(param, '.'); i > 0 {
		return param[:i]
	}
	return param
}

// reinitLayers parses --reinit: comma-separated names of layers that have
// params; an unknown name is a usage error that lists some that exist.
func reinitLayers(meta *Meta, list string) (map[string]bool, error) {
	have := map[string]bool{}
	var names []string
	for _, p := range meta.Params {
		if l := layerOf(p.Name); !have[l] {
			have[l] = true
			names = append(names, l)
		}
	}
	fresh := map[string]bool{}
	for _, l := range strings.Split(list, ",") {
		l = strings.TrimSpace(l)
		if !have[l] {
			if len(names) > 8 {
				names = append(names[:4:4], "...", names[len(names)-2], names[len(names)-1])
			}
			return nil, usageError{fmt.Sprintf("--reinit %q: the model has no layer %q with weights (its layers with weights: %s)", list, l, strings.Join(names, ", "))}
		}
		fresh[l] = true
	}
	return fresh, nil
}

// mismatchedLayers lists the layers whose params f holds with another
// shape than the model's, in the model's order.
func mismatchedLayers(meta *Meta, f *safetensors.File) []string {
	var layers []string
	seen := map[string]bool{}
	for _, p := range meta.Params {
		if t, ok := f.Tensor(p.Name); ok && !slices.Equal(t.Shape, p.Shape) && !seen[layerOf(p.Name)] {
			seen[layerOf(p.Name)] = true
			layers = append(layers, layerOf(p.Name))
		}
	}
	return layers
}
