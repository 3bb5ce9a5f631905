package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/mlbuild/mlbuild/emit"
	"github.com/mlbuild/mlbuild/planner"
	"github.com/mlbuild/mlbuild/rt/safetensors"
	"github.com/mlbuild/mlbuild/spec"
)

// Metadata keys of the preprocessing that training fits and records in a
// weights file (rt/app/data_spec.go writes and reads them): a program
// whose spec standardises cannot use weights without them.
const (
	mdStandardizeMean = "mlbuild.standardize.mean"
	mdTargetsMean     = "mlbuild.targets.mean"
	mdNormalizeMean   = "mlbuild.normalize.mean"
)

// maxEmbeddedBytes is the largest file go:embed can put in a program: Go's
// linker refuses any symbol over 2e9 bytes ("symbol too large").
const maxEmbeddedBytes = 2_000_000_000

// readWeights reads the file of `compile --weights` and checks it against
// the training plan's params before anything is built: every param the
// model has, by name, with its shape, and nothing else; every tensor of a
// dtype the programs read (F32, or F64, F16 and BF16, converted on
// loading); and the preprocessing statistics the spec's training fits.
// The program carries the file laid out as its state arena where it can
// (arenaLayout: the same tensors, in another order, with pads), else byte
// for byte; info prints the SHA-256 of the file as given, the one
// sha256sum prints.
func readWeights(path string, m *spec.Model, train *planner.Plan) (*emit.Weights, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, withCode(ExitIO, fmt.Errorf("--weights: %v", err))
	}
	if fi.IsDir() {
		return nil, withCode(ExitUsage, fmt.Errorf("--weights %s is a folder; give the safetensors file of the weights (NAME.safetensors)", path))
	}
	if !fi.Mode().IsRegular() {
		return nil, withCode(ExitIO, fmt.Errorf("--weights %s is not a regular file (a FIFO or a device would be waited on or read for ever)", path))
	}
	if fi.Size() > maxEmbeddedBytes {
		return nil, withCode(ExitInvalid, fmt.Errorf("--weights %s is %d bytes: Go's linker cannot embed a file over %d bytes in a program; compile without --weights and give the file to the program at run time (predict --weights %s)", path, fi.Size(), int64(maxEmbeddedBytes), filepath.Base(path)))
	}
	if !plausibleHeader(path, fi.Size()) {
		// Not a safetensors file (a text file, a large download): Read
		// says why from its first bytes, without reading it whole.
		if _, err := safetensors.Read(path); err != nil {
			return nil, withCode(ExitInvalid, fmt.Errorf("--weights: %v", err))
		}
	}
	// The header first: a file of a dtype programs do not read, a
	// checkpoint or another model's tensors is refused before it is read
	// whole.
	h, err := safetensors.ReadHeader(path)
	if err != nil {
		return nil, withCode(ExitInvalid, fmt.Errorf("--weights: %v", err))
	}
	for _, t := range h.Tensors {
		switch t.DType {
		case "F32", "F64", "F16", "BF16": // what programs convert (rt/safetensors)
		default:
			return nil, withCode(ExitInvalid, fmt.Errorf("--weights: %s: tensor %q: dtype %s is not supported: mlbuild's models compute in float32 and read F32, F64, F16 and BF16 tensors", path, t.Name, t.DType))
		}
	}
	if _, ok := h.Metadata["mlbuild.epoch"]; ok {
		return nil, withCode(ExitInvalid, fmt.Errorf("--weights %s is a training checkpoint (weights and optimizer state); embed the weights file that train wrote with --out (%s.safetensors by default)", path, m.Name))
	}
	var want []safetensors.Spec
	for _, p := range train.Params {
		want = append(want, safetensors.Spec{Name: p.Name, Shape: train.Buffers[p.Buf].Shape})
	}
	if err := safetensors.CheckShapes(h, want); err != nil {
		return nil, withCode(ExitInvalid, fmt.Errorf("--weights: %v\nthe model is the one of %s; `mlbuild plan %s` lists its params (the buffers of kind param and stat)", err, m.File, m.File))
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, withCode(ExitIO, fmt.Errorf("--weights: %v", err))
	}
	f, err := safetensors.ReadBytes(path, data)
	if err != nil {
		return nil, withCode(ExitInvalid, fmt.Errorf("--weights: %v", err))
	}
	// Embedded NaN or Inf weights would make every prediction NaN.
	if err := f.CheckFinite(); err != nil {
		return nil, withCode(ExitInvalid, fmt.Errorf("--weights: %v", err))
	}
	d := m.Dataset
	for _, need := range []struct {
		on       bool
		key, why string
	}{
		{d.Standardize, mdStandardizeMean, "standardises its inputs"},
		{d.StandardizeTargets && d.Task == "regression", mdTargetsMean, "standardises its regression targets"},
		// Fixed normalisation values are the spec's: only fitted ones must
		// come with the weights.
		{d.Normalize != nil && d.Normalize.Fit, mdNormalizeMean, "fits its image channels' normalisation"},
	} {
		if _, ok := f.Metadata[need.key]; need.on && !ok {
			return nil, withCode(ExitInvalid, fmt.Errorf("--weights %s holds no %s metadata, but the spec %s %s: embed weights that this model's train wrote (they carry the statistics it fitted)", path, need.key, m.File, need.why))
		}
	}
	w := &emit.Weights{Source: filepath.Base(path), Data: data}
	w.SourceSHA256 = w.SHA256()
	// Laid out as the state arena, the weights are mapped as it by the
	// program rather than copied into it (a one-sample predict of resnet18
	// spent a third of its time copying 46 MB).
	if laid, ok := arenaLayout(f, train); ok {
		w.Data = laid
	}
	return w, nil
}

// plausibleHeader reports whether the file at path starts with the
// header length a safetensors file of its size can have.
func plausibleHeader(path string, size int64) bool {
	f, err := os.Open(path)
	if err != nil {
		return true // ReadFile reports it
	}
	defer f.Close()
	var prefix [8]byte
	if _, err := io.ReadFull(f, prefix[:]); err != nil {
		return false
	}
	n := binary.LittleEndian.Uint64(prefix[:])
	return n <= safetensors.MaxHeaderSize && n <= uint64(size)-8
}
