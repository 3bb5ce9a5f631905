package app

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
)

// A checkpoint keeps the settings of its run besides its position, so
// that `train --resume CKPT` continues the run that was interrupted: the
// same epochs (which is also the length of the learning-rate schedule),
// learning rate, image limit, validation split, patience, seed and data
// folder, whatever the spec's defaults say. A flag given with --resume
// overrides the kept value, and a note says so.

// runSettings pairs train's flags with the checkpoint metadata keys that
// keep their values.
var runSettings = []struct{ flag, key string }{
	{"epochs", "mlbuild.epochs"},
	{"lr", "mlbuild.lr"},
	{"limit", "mlbuild.limit"},
	{"validation-split", "mlbuild.validation_split"},
	{"patience", "mlbuild.patience"},
	{"data", "mlbuild.data"},
	{"out", "mlbuild.out"},
	{"checkpoint", "mlbuild.checkpoint"},
}

// pathSetting reports whether a run setting is a path (kept absolute).
func pathSetting(flagName string) bool {
	return flagName == "data" || flagName == "out" || flagName == "checkpoint"
}

// settingsMetadata records o's run settings in a checkpoint's metadata.
func settingsMetadata(md map[string]string, o *trainOptions) {
	md["mlbuild.epochs"] = strconv.Itoa(o.epochs)
	md["mlbuild.lr"] = strconv.FormatFloat(o.lr, 'g', -1, 64)
	md["mlbuild.limit"] = strconv.Itoa(o.limit)
	md["mlbuild.validation_split"] = strconv.FormatFloat(o.valSplit, 'g', -1, 64)
	md["mlbuild.patience"] = strconv.Itoa(o.patience)
	for key, path := range map[string]string{"mlbuild.data": o.data, "mlbuild.out": o.out, "mlbuild.checkpoint": o.checkpoint} {
		if abs, err := filepath.Abs(path); err == nil {
			md[key] = abs
		}
	}
}

// resumePoint is where a checkpoint's run stands.
type resumePoint struct {
	epoch, batch, badEpochs int
	kept                    bool // the checkpoint keeps its run's settings
}

// adoptRunSettings reads the checkpoint named by --resume and sets every
// run setting that was not given on the command line to the checkpoint's
// value; a given value that differs is kept, with a note on stderr.
// Checkpoints written before mlbuild kept settings change nothing.
func adoptRunSettings(fs *flag.FlagSet, o *trainOptions, stderr io.Writer) (*resumePoint, error) {
	md, err := readMetadata(o.resume)
	if err != nil {
		return nil, fmt.Errorf("--resume %s: %v", o.resume, err)
	}
	at := &resumePoint{}
	for _, f := range []struct {
		key string
		dst *int
	}{{"mlbuild.epoch", &at.epoch}, {"mlbuild.batch", &at.batch}, {"mlbuild.bad_epochs", &at.badEpochs}} {
		v, err := strconv.Atoi(md[f.key])
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%s: not a training checkpoint (metadata %q is %q); pass weights with --weights to eval or predict, or start training afresh", o.resume, f.key, md[f.key])
		}
		*f.dst = v
	}
	given := flagsGiven(fs)
	o.kept = map[string]string{}
	for _, s := range runSettings {
		kept, ok := md[s.key]
		if !ok {
			continue
		}
		at.kept = true
		fl := fs.Lookup(s.flag)
		if !given[s.flag] {
			if err := fl.Value.Set(kept); err != nil || pathSetting(s.flag) && !filepath.IsAbs(kept) {
				if err == nil {
					err = fmt.Errorf("a path this program records is absolute")
				}
				return nil, fmt.Errorf("%s: checkpoint metadata %s is %q: %v; the checkpoint is damaged: give --%s, or start training afresh", o.resume, s.key, kept, err, s.flag)
			}
			o.kept[s.flag] = s.key
			continue
		}
		if differs(s.flag, fl.Value.String(), kept) {
			note := ""
			if s.flag == "epochs" {
				note = "; the learning-rate schedule spans the new length"
			}
			fmt.Fprintf(stderr, "note: --%s %s differs from the interrupted run's %s; using %s%s\n", s.flag, fl.Value.String(), kept, fl.Value.String(), note)
		}
	}
	// A checkpoint written before the run's paths were kept continues on
	// itself, and writes its weights where its name says (NAME.ckpt.EXT
	// is the checkpoint of NAME.EXT), not to the default --out of the
	// current folder, which may hold another run's weights.
	if _, ok := md["mlbuild.checkpoint"]; !ok && !given["checkpoint"] {
		o.checkpoint = o.resume
	}
	if _, ok := md["mlbuild.out"]; !ok && !given["out"] {
		ext := filepath.Ext(o.resume)
		if base := strings.TrimSuffix(o.resume, ext); strings.HasSuffix(base, ".ckpt") {
			o.out = strings.TrimSuffix(base, ".ckpt") + ext
		} else {
			return nil, fmt.Errorf("%s does not record where its run wrote its weights (it was written by an older program) and its name does not say (NAME.ckpt.safetensors): give --out", o.resume)
		}
	}
	return at, nil
}

// differs compares a flag's value with a kept one: numbers as numbers,
// folders as absolute paths.
func differs(flagName, value, kept string) bool {
	if pathSetting(flagName) {
		a, err1 := filepath.Abs(value)
		b, err2 := filepath.Abs(kept)
		return err1 != nil || err2 != nil || a != b
	}
	x, err1 := strconv.ParseFloat(value, 64)
	y, err2 := strconv.ParseFloat(kept, 64)
	if err1 != nil || err2 != nil {
		return value != kept
	}
	return x != y
}

// finishedRun reports a --resume of a run that has nothing left to do:
// the program prints msg and exits 0, writing nothing.
type finishedRun struct{ msg string }

func (f finishedRun) Error() string { return f.msg }

// checkFinished returns a finishedRun when the checkpoint's run has
// trained all its epochs or stopped early, under the settings in o.
func checkFinished(o *trainOptions, at *resumePoint) error {
	switch {
	case at.epoch >= o.epochs:
		return finishedRun{fmt.Sprintf("%s: this run is finished (%d of %d epochs); nothing was changed. To train longer, pass a larger --epochs with --resume (the learning-rate schedule then spans the new length).", o.resume, at.epoch, o.epochs)}
	case o.patience > 0 && at.badEpochs >= o.patience && at.batch == 0:
		return finishedRun{fmt.Sprintf("%s: this run stopped early after epoch %d (the validation loss had not improved for %d epochs); nothing was changed. To train on, pass a larger --patience, or --patience 0, with --resume.", o.resume, at.epoch, at.badEpochs)}
	}
	return nil
}
