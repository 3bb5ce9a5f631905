package app

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unsafe"

	"github.com/mlbuild/mlbuild/rt/cpu"
	"github.com/mlbuild/mlbuild/rt/safetensors"
)

// trainState is where a run stands: what a checkpoint saves besides tensors.
type trainState struct {
	epoch     int // epochs completed
	batch     int // batches of the current epoch completed
	step      int // optimizer steps taken
	seed      int64
	bestVal   float64
	badEpochs int
	run       *trainOptions // the run's settings, kept so that --resume continues it
	vocab     string        // a text model's vocabulary (metadata mdVocab); "" for the others
}

// weightTensors lists the params and statistics as safetensors tensors, in
// plan order, viewing the state arena (no copies).
func weightTensors(m Model, withOptimizer bool) []safetensors.Tensor {
	meta := m.Meta()
	state := m.State()
	var ts []safetensors.Tensor
	for _, p := range meta.Params {
		ts = append(ts, safetensors.Tensor{Name: p.Name, Shape: p.Shape, Data: state[p.Offset : p.Offset+p.Size]})
		if !withOptimizer {
			continue
		}
		for i, off := range p.State {
			ts = append(ts, safetensors.Tensor{Name: p.Name + "." + meta.StateNames[i], Shape: p.Shape, Data: state[off : off+p.Size]})
		}
	}
	return ts
}

func baseMetadata(meta *Meta) map[string]string {
	md := map[string]string{
		"format":          "pt",
		"mlbuild.model":   meta.Name,
		"mlbuild.version": meta.Version,
		"mlbuild.spec":    meta.SpecFile,
	}
	meta.rec.metadata(md) // what training fitted on the data
	return md
}

// saveWeights writes the params and statistics (a file PyTorch's
// safetensors.torch.load_file reads into an equivalent module's state_dict).
// The write is atomic: a crash leaves the old file.
func saveWeights(m Model, path string) error {
	if err := safetensors.Write(path, weightTensors(m, false), baseMetadata(m.Meta())); err != nil {
		return fmt.Errorf("writing weights: %v", err)
	}
	return nil
}

// saveWeightsAt is saveWeights for training's output: the file records
// how many epochs made the weights (mlbuild.trained_epochs), which with a
// validation split is the best epoch, not the last, and the samples the
// run held out (splitMetadata), which eval --split validation takes.
func saveWeightsAt(m Model, path string, epochs int, run *trainOptions) error {
	if !writesOutputs(m) {
		return nil // node 0 writes them
	}
	md := baseMetadata(m.Meta())
	md["mlbuild.trained_epochs"] = strconv.Itoa(epochs)
	splitMetadata(md, run)
	if err := safetensors.Write(path, weightTensors(m, false), md); err != nil {
		return fmt.Errorf("writing weights: %v", err)
	}
	return nil
}

// saveCheckpoint writes weights, optimizer state and the run's position.
func saveCheckpoint(m Model, path string, st trainState) error {
	if !writesOutputs(m) {
		return nil // node 0 writes it
	}
	md := baseMetadata(m.Meta())
	md["mlbuild.epoch"] = strconv.Itoa(st.epoch)
	md["mlbuild.batch"] = strconv.Itoa(st.batch)
	md["mlbuild.step"] = strconv.Itoa(st.step)
	md["mlbuild.seed"] = strconv.FormatInt(st.seed, 10)
	md["mlbuild.best_val_loss"] = strconv.FormatFloat(st.bestVal, 'g', -1, 64)
	md["mlbuild.bad_epochs"] = strconv.Itoa(st.badEpochs)
	if st.run != nil {
		settingsMetadata(md, st.run)
	}
	if err := safetensors.Write(path, weightTensors(m, true), md); err != nil {
		return fmt.Errorf("writing checkpoint: %v", err)
	}
	return nil
}

// expected lists the tensors a weights file for this model must have.
func expected(m Model, withOptimizer bool) []safetensors.Spec {
	// From the metadata, not weightTensors: checking a file must not make
	// the state arena (mapEmbedded makes it from the file).
	meta := m.Meta()
	var want []safetensors.Spec
	for _, p := range meta.Params {
		want = append(want, safetensors.Spec{Name: p.Name, Shape: p.Shape})
		if withOptimizer {
			for _, name := range meta.StateNames[:len(p.State)] {
				want = append(want, safetensors.Spec{Name: p.Name + "." + name, Shape: p.Shape})
			}
		}
	}
	return want
}

// loadInto reads path, checks every tensor this model needs is there with
// its shape, and copies them into the state arena.
func loadInto(m Model, path string, withOptimizer bool) (*safetensors.File, error) {
	// The header first: a file whose tensors do not fit the model costs
	// only its header, not its size, in memory.
	if err := regularFiles(path); err != nil {
		return nil, err
	}
	h, err := safetensors.ReadHeader(path)
	if err != nil {
		return nil, err
	}
	if err := safetensors.CheckShapes(h, expected(m, withOptimizer || isCheckpoint(h))); err != nil {
		return nil, fmt.Errorf("%s does not hold weights of model %s: %v", path, m.Meta().Name, err)
	}
	f, err := safetensors.Read(path)
	if err != nil {
		return nil, err
	}
	return f, copyWeights(m, f, withOptimizer)
}

// copyWeights checks that f holds every tensor this model needs, with its
// shape, and copies them into the state arena; f.Path names it in
// messages.
func copyWeights(m Model, f *safetensors.File, withOptimizer bool) error {
	return copyWeightsExcept(m, f, withOptimizer, nil)
}

// copyWeightsExcept is copyWeights leaving alone the params of the fresh
// layers (train --reinit; nil: none), whose tensors in the file may have
// any shape (a head for another number of classes) or be missing.
func copyWeightsExcept(m Model, f *safetensors.File, withOptimizer bool, fresh map[string]bool) error {
	// A checkpoint also holds the optimizer state: check it whole, then
	// take only what was asked for.
	var want []safetensors.Spec
	for _, s := range expected(m, withOptimizer || isCheckpoint(f)) {
		if !inLayers(s.Name, fresh) {
			want = append(want, s)
		}
	}
	for _, t := range f.Tensors { // the fresh layers' tensors in the file are not read
		if inLayers(t.Name, fresh) {
			want = append(want, safetensors.Spec{Name: t.Name, Shape: t.Shape})
		}
	}
	if err := safetensors.CheckShapes(f, want); err != nil {
		return fmt.Errorf("%s does not hold weights of model %s: %v", f.Path, m.Meta().Name, err)
	}
	// A NaN or Inf weight (or optimizer moment) would make every output
	// NaN: predict printed "class 0 (p=NaN)" and exited 0.
	if err := f.CheckFinite(); err != nil {
		return err
	}
	// The tensors are copied on the program's threads: a copy into a
	// fresh arena is mostly page faults, which the kernel serves in
	// parallel (46 MB of resnet18 weights are most of a one-sample
	// predict's start-up).
	var ts []safetensors.Tensor
	for _, t := range weightTensors(m, withOptimizer) {
		if !inLayers(t.Name, fresh) {
			ts = append(ts, t)
		}
	}
	errs := make([]error, len(ts))
	cpu.ParallelFor(len(ts), 1, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			errs[i] = f.CopyInto(ts[i].Name, ts[i].Data)
		}
	})
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// inLayers reports whether the tensor called name (a param, or its
// optimizer state: "fc.weight.adam_m") belongs to one of layers.
func inLayers(name string, layers map[string]bool) bool {
	for l := range layers {
		if strings.HasPrefix(name, l+".") {
			return true
		}
	}
	return false
}

// isCheckpoint reports whether f was written by train as a checkpoint
// (weights, optimizer state and the run's position).
func isCheckpoint(f *safetensors.File) bool {
	_, ok := f.Metadata["mlbuild.epoch"]
	return ok
}

// embeddedName is how messages name the weights compiled into the program.
func (e *EmbeddedWeights) embeddedName() string {
	return fmt.Sprintf("the embedded weights (%s)", e.Source)
}

// shortHash is the first 12 hex digits of the weights' SHA-256, enough to
// tell two files apart in a message; info prints the whole hash.
func (e *EmbeddedWeights) shortHash() string {
	if len(e.SHA256) > 12 {
		return e.SHA256[:12]
	}
	return e.SHA256
}

// readEmbedded checks the weights compiled into the program, in place:
// go:embed leaves them in the executable's read-only data, and CopyInto
// converts each tensor from there into the state arena, their only copy.
func readEmbedded(meta *Meta) (*safetensors.File, error) {
	e := meta.Embedded
	f, err := safetensors.ReadBytesInPlace(e.embeddedName(), e.Data)
	if err != nil {
		return nil, fmt.Errorf("%v (a bug in mlbuild: compile checked them)", err)
	}
	return f, nil
}

// loadWeights loads params and statistics from a weights file or a
// checkpoint (whose extra optimizer tensors are ignored); path "" means
// the weights compiled into the program.
func loadWeights(m Model, path string) error {
	meta := m.Meta()
	var f *safetensors.File
	var err error
	if path == "" && meta.Embedded != nil {
		if f, err = readEmbedded(meta); err == nil && !mapEmbedded(m, f) {
			err = copyWeights(m, f, false)
		}
	} else {
		f, err = loadInto(m, path, false)
	}
	if err != nil {
		return err
	}
	meta.rec, err = readRecord(meta, f.Path, f.Metadata)
	return err
}

// mapEmbedded makes the state arena with the embedded weights f already
// in it, mapped from the executable rather than copied (mapState), when
// compile laid them out as the arena (every param's F32 bytes at 4 × its
// offset from the file's data section) and the arena is not made yet. It
// reports whether it did; if not, the caller copies.
func mapEmbedded(m Model, f *safetensors.File) bool {
	meta := m.Meta()
	data := meta.Embedded.Data
	if safetensors.CheckShapes(f, expected(m, false)) != nil {
		return false
	}
	start, end := safetensors.DataStart(data), 0
	for _, p := range meta.Params {
		b := f.Bytes(p.Name)
		t, _ := f.Tensor(p.Name)
		at := start + 4*p.Offset
		if t == nil || t.DType != "F32" || len(b) == 0 || len(b) != 4*p.Size || at+len(b) > len(data) || unsafe.SliceData(b) != &data[at] {
			return false
		}
		end = max(end, at+len(b))
	}
	if end == 0 {
		return false
	}
	stateImage = data[start:end]
	st := m.State()
	stateImage = nil
	return len(st) > 0 && len(mappedState) > 0 && unsafe.SliceData(st) == unsafe.SliceData(mappedState)
}

// weightsRequired is the usage error of eval and predict run without
// --weights by a program that has no embedded weights; nil when the
// program has them or a file was given.
func weightsRequired(meta *Meta, path, message string) error {
	if path == "" && meta.Embedded == nil {
		return usageError{message}
	}
	return nil
}

// overridesEmbedded is in the help of --weights when the program has
// embedded weights; a command's help then leaves --weights out of the
// flags it requires.
const overridesEmbedded = "instead of the embedded "

// weightsUsage is the help of the --weights flag of eval and predict.
func weightsUsage(meta *Meta) string {
	if e := meta.Embedded; e != nil {
		return "use the trained weights in `FILE` (safetensors) " + overridesEmbedded + e.Source
	}
	return "the trained weights `FILE` (safetensors), e.g. the output of train"
}

// loadCheckpoint restores weights, optimizer state and the run's position.
func loadCheckpoint(m Model, path string) (trainState, error) {
	f, err := loadInto(m, path, true)
	if err != nil {
		return trainState{}, err
	}
	md := f.Metadata
	st := trainState{bestVal: math.Inf(1)}
	for _, field := range []struct {
		key string
		dst *int
	}{{"mlbuild.epoch", &st.epoch}, {"mlbuild.batch", &st.batch}, {"mlbuild.step", &st.step}, {"mlbuild.bad_epochs", &st.badEpochs}} {
		v, err := strconv.Atoi(md[field.key])
		if err != nil || v < 0 {
			return trainState{}, fmt.Errorf("%s: not a training checkpoint (metadata %q is %q); pass weights with --weights to eval or predict, or start training afresh", path, field.key, md[field.key])
		}
		*field.dst = v
	}
	if st.seed, err = strconv.ParseInt(md["mlbuild.seed"], 10, 64); err != nil {
		return trainState{}, fmt.Errorf("%s: checkpoint metadata mlbuild.seed is %q", path, md["mlbuild.seed"])
	}
	// The best validation loss decides whether an epoch's weights are
	// written: a NaN (or -Inf) would never be beaten, so the resumed run
	// would never write its weights.
	if s, ok := md["mlbuild.best_val_loss"]; ok {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, -1) {
			return trainState{}, fmt.Errorf("%s: checkpoint metadata mlbuild.best_val_loss is %q; want a number (+Inf before the first validation); the checkpoint is damaged", path, s)
		}
		st.bestVal = v
	}
	if st.badEpochs > st.epoch {
		return trainState{}, fmt.Errorf("%s: checkpoint metadata mlbuild.bad_epochs is %d, more than the %d epochs of mlbuild.epoch; the checkpoint is damaged", path, st.badEpochs, st.epoch)
	}
	if name := md["mlbuild.model"]; name != "" && name != m.Meta().Name {
		return trainState{}, fmt.Errorf("%s is a checkpoint of model %q, not %q", path, name, m.Meta().Name)
	}
	st.vocab = md[mdVocab]
	return st, nil
}
