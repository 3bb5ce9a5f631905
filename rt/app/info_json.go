package app

import (
	"io"
	"runtime"

	"github.com/mlbuild/mlbuild/rt/jsontext"
)

// writeInfoJSON prints what `info --json` prints: the same facts as the
// table, for scripts, as one indented object: model, spec, backend,
// build_key, mlbuild, go, platform, input, classes, batch, state_bytes,
// train_work_bytes, infer_work_bytes, params, layers (name, op, output,
// params), tensors (name, shape, trainable: the weights file's entries,
// with their PyTorch state_dict names), training (the spec's settings,
// the flags' defaults) and embedded_weights (source, sha256, bytes; null
// when the program has none).
func writeInfoJSON(m Model, w io.Writer) error {
	meta := m.Meta()
	j := jsontext.NewWriter("  ")
	str := func(key, v string) {
		j.Key(key)
		j.String(v)
	}
	num := func(key string, v int64) {
		j.Key(key)
		j.Int(v)
	}
	ints := func(key string, v []int) {
		j.Key(key)
		if v == nil {
			j.Null()
			return
		}
		j.Ints(v)
	}
	j.BeginObject()
	str("model", meta.Name)
	str("spec", meta.SpecFile)
	str("backend", meta.Backend)
	str("build_key", meta.BuildKey)
	str("mlbuild", meta.Version)
	str("go", runtime.Version())
	str("platform", runtime.GOOS+"/"+runtime.GOARCH)
	ints("input", meta.InputShape)
	num("classes", int64(meta.Classes))
	num("batch", int64(meta.Batch))
	num("state_bytes", meta.StateBytes)
	num("train_work_bytes", meta.TrainWorkBytes)
	num("infer_work_bytes", meta.InferWorkBytes)
	writeMemoryJSON(j, meta.Memory)
	params := 0
	for _, l := range meta.Layers {
		params += l.Params
	}
	num("params", int64(params))
	j.Key("layers")
	j.BeginArray()
	for _, l := range meta.Layers {
		j.BeginObject()
		str("name", l.Name)
		str("op", l.Op)
		ints("output", l.OutShape)
		num("params", int64(l.Params))
		j.EndObject()
	}
	j.EndArray()
	j.Key("tensors")
	j.BeginArray()
	for _, p := range meta.Params {
		j.BeginObject()
		str("name", p.Name)
		ints("shape", p.Shape)
		j.Key("trainable")
		j.Bool(p.Trainable)
		j.EndObject()
	}
	j.EndArray()
	d := meta.Defaults
	j.Key("training")
	j.BeginObject()
	str("loss", d.Loss)
	str("optimizer", d.Optimizer)
	j.Key("lr")
	j.Float(d.LR, 64)
	str("schedule", d.Schedule)
	if d.WarmupSteps > 0 {
		num("warmup_steps", int64(d.WarmupSteps))
	}
	num("epochs", int64(d.Epochs))
	num("seed", d.Seed)
	j.Key("validation_split")
	j.Float(d.ValidationSplit, 64)
	num("patience", int64(d.Patience))
	j.EndObject()
	j.Key("embedded_weights")
	if e := meta.Embedded; e != nil {
		j.BeginObject()
		str("source", e.Source)
		str("sha256", e.SHA256)
		num("bytes", int64(len(e.Data)))
		j.EndObject()
	} else {
		j.Null()
	}
	j.EndObject()
	_, err := w.Write(append(j.Bytes(), '\n'))
	return err
}
