package app

import (
	"encoding/json"
	"io"
	"runtime"
)

// infoJSON is what `info --json` prints: the same facts as the table, for
// scripts.
type infoJSON struct {
	Model          string       `json:"model"`
	Spec           string       `json:"spec"`
	Backend        string       `json:"backend"`
	BuildKey       string       `json:"build_key"`
	Mlbuild        string       `json:"mlbuild"`
	Go             string       `json:"go"`
	Platform       string       `json:"platform"`
	Input          []int        `json:"input"`
	Classes        int          `json:"classes"`
	Batch          int          `json:"batch"`
	StateBytes     int64        `json:"state_bytes"`
	TrainWorkBytes int64        `json:"train_work_bytes"`
	InferWorkBytes int64        `json:"infer_work_bytes"`
	Params         int          `json:"params"`
	Layers         []layerJSON  `json:"layers"`
	Tensors        []tensor     `json:"tensors"`
	Training       trainingJSON `json:"training"`
	// Weights are the embedded weights, null when the program has none.
	Weights *weightsJSON `json:"embedded_weights"`
}

// weightsJSON describes the weights compiled into the program.
type weightsJSON struct {
	Source string `json:"source"`
	SHA256 string `json:"sha256"`
	Bytes  int    `json:"bytes"`
}

// trainingJSON is the spec's training settings, the flags' defaults.
type trainingJSON struct {
	Loss            string  `json:"loss"`
	Optimizer       string  `json:"optimizer"`
	LR              float64 `json:"lr"`
	Schedule        string  `json:"schedule"`
	Epochs          int     `json:"epochs"`
	Seed            int64   `json:"seed"`
	ValidationSplit float64 `json:"validation_split"`
	Patience        int     `json:"patience"`
}

type layerJSON struct {
	Name   string `json:"name"`
	Op     string `json:"op"`
	Output []int  `json:"output"`
	Params int    `json:"params"`
}

// tensor is one entry of the weights file, with its PyTorch state_dict name.
type tensor struct {
	Name      string `json:"name"`
	Shape     []int  `json:"shape"`
	Trainable bool   `json:"trainable"`
}

func writeInfoJSON(m Model, w io.Writer) error {
	meta := m.Meta()
	r := infoJSON{Model: meta.Name, Spec: meta.SpecFile, Backend: meta.Backend, BuildKey: meta.BuildKey, Mlbuild: meta.Version,
		Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH, Input: meta.InputShape, Classes: meta.Classes, Batch: meta.Batch,
		StateBytes: meta.StateBytes, TrainWorkBytes: meta.TrainWorkBytes, InferWorkBytes: meta.InferWorkBytes,
		Layers: []layerJSON{}, Tensors: []tensor{}}
	d := meta.Defaults
	r.Training = trainingJSON{d.Loss, d.Optimizer, d.LR, d.Schedule, d.Epochs, d.Seed, d.ValidationSplit, d.Patience}
	for _, l := range meta.Layers {
		r.Layers = append(r.Layers, layerJSON{l.Name, l.Op, l.OutShape, l.Params})
		r.Params += l.Params
	}
	for _, p := range meta.Params {
		r.Tensors = append(r.Tensors, tensor{p.Name, p.Shape, p.Trainable})
	}
	if e := meta.Embedded; e != nil {
		r.Weights = &weightsJSON{e.Source, e.SHA256, len(e.Data)}
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
