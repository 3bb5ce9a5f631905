package app

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mlbuild/mlbuild/rt/cpu"
	"github.com/mlbuild/mlbuild/rt/progress"
)

// nanError reports a loss or weight that stopped being a finite number.
type nanError struct{ msg string }

func (e *nanError) Error() string { return e.msg }

// interruptedError reports training stopped by a signal after a checkpoint.
type interruptedError struct{ checkpoint string }

func (e *interruptedError) Error() string {
	return fmt.Sprintf("interrupted; checkpoint written to %s (continue with --resume %s)", e.checkpoint, e.checkpoint)
}

// trainOptions are the flags of `train`.
type trainOptions struct {
	data, out, checkpoint, resume, metrics string
	gpus                                   string // --gpus: N or all (gpus.go)
	// nodes and nodeFlags are the flags of a run over several machines
	// (gpus.go's nodeFlags), which rt/gpuhost reads before train runs.
	nodes                            string
	nodeFlags                        map[string]*string
	init                             string // --init: a weights file, "seed", "embedded", or "" (see startWeights)
	reinit                           string // --reinit: layers that keep the seed's initialisation under --init
	epochs, threads, limit, patience int
	lr, valSplit                     float64
	seed                             int64
	quiet, force, skipBadImages      bool
	syncBN                           bool // --sync-bn (gpus.go)
	// kept maps the flags whose values --resume took from the
	// checkpoint to their metadata keys, for messages.
	kept map[string]string
}

func parseTrainFlags(meta *Meta, args []string, stdout, stderr io.Writer) (*trainOptions, error) {
	d := meta.Defaults
	o := &trainOptions{}
	fs := newFlags(meta, "train")
	fs.StringVar(&o.data, "data", "", "the `DIR` holding the training data ("+dataFiles(meta, true)+"); with --resume, the interrupted run's")
	fs.IntVar(&o.epochs, "epochs", d.Epochs, "train for `N` epochs (the learning-rate schedule spans them)")
	fs.StringVar(&o.out, "out", meta.Name+".safetensors", "write the trained weights to `FILE` (safetensors)")
	fs.StringVar(&o.checkpoint, "checkpoint", "", "write a checkpoint to `FILE` at epochs' ends (each one, unless an epoch takes less than 20 times a write), after the last and on Ctrl-C (default: OUT with .ckpt before the extension)")
	fs.StringVar(&o.resume, "resume", "", "continue the run that wrote the checkpoint `FILE`, with its settings")
	fs.StringVar(&o.init, "init", "", initUsage(meta))
	fs.StringVar(&o.reinit, "reinit", "", "with --init: the `LAYERS` (comma-separated) that start from the seed's initialisation instead of the weights, e.g. a new head for another number of classes")
	fs.StringVar(&o.metrics, "metrics", "", "append JSON lines of step and epoch metrics to `FILE`")
	fs.Float64Var(&o.lr, "lr", d.LR, "the learning rate `X` (the schedule's first)")
	fs.Int64Var(&o.seed, "seed", d.Seed, "the random seed `N` of initial weights, shuffling and dropout")
	fs.StringVar(&o.gpus, "gpus", "1", gpusUsage)
	o.nodeFlags = map[string]*string{}
	for _, f := range nodeFlags {
		o.nodeFlags[f.name] = fs.String(f.name, "", f.usage)
	}
	fs.BoolVar(&o.syncBN, "sync-bn", false, syncBNUsage)
	fs.IntVar(&o.threads, "threads", 0, "use `N` CPU threads (0: all)")
	fs.IntVar(&o.limit, "limit", 0, "use only the first `N` training images (0: all)")
	fs.Float64Var(&o.valSplit, "validation-split", d.ValidationSplit, "hold out the fraction `X` of the training images for validation, in [0, 1)")
	fs.IntVar(&o.patience, "patience", d.Patience, "stop after `N` epochs without a better validation loss (0: never)")
	fs.BoolVar(&o.quiet, "quiet", false, "print only the summary")
	if meta.format() == "imagefolder" {
		fs.BoolVar(&o.skipBadImages, "skip-bad-images", false, "leave out, with a warning for each, the images whose header cannot be read or whose size does not fit the model (without it, training refuses them before the first step)")
	}
	fs.BoolVar(&o.force, "force", false, "replace --out and --checkpoint, and append to --metrics, even when they exist and were not written by an mlbuild program")
	if err := noOperands(fs, args, stdout); err != nil {
		return nil, err
	}
	if err := noDataset(meta, "train"); err != nil {
		return nil, err
	}
	if err := checkInit(meta, o); err != nil {
		return nil, err
	}
	var at *resumePoint
	if o.resume != "" {
		var err error
		if at, err = adoptRunSettings(fs, o, stderr); err != nil {
			return nil, err
		}
	}
	if o.data == "" {
		return nil, usageError{"train needs --data DIR (the folder with " + dataFiles(meta, true) + ")"}
	}
	if flagName, msg := badSetting(o); msg != "" {
		if key := o.kept[flagName]; key != "" {
			// Not the user's flag: the checkpoint's value is bad.
			return nil, fmt.Errorf("%s: checkpoint metadata %s is %s, which --%s cannot be (%s); the checkpoint is damaged: give --%s, or start training afresh", o.resume, key, fs.Lookup(flagName).Value.String(), flagName, msg, flagName)
		}
		return nil, usageError{"--" + flagName + " " + msg}
	}
	if checkThreads(o.threads) != nil {
		return nil, checkThreads(o.threads)
	}
	if at != nil {
		if err := checkFinished(o, at); err != nil {
			return nil, err
		}
	}
	if o.checkpoint == "" {
		ext := filepath.Ext(o.out)
		o.checkpoint = strings.TrimSuffix(o.out, ext) + ".ckpt" + ext
	}
	if err := checkInitKept(o); err != nil {
		return nil, err
	}
	if err := distinctOutputs(o); err != nil {
		return nil, err
	}
	for _, f := range []struct{ name, path string }{{"out", o.out}, {"checkpoint", o.checkpoint}} {
		if err := checkReplaceable(f.name, f.path, o.force); err != nil {
			return nil, keptPath(o, f.name, err)
		}
		if err := checkWritable(f.name, f.path); err != nil {
			return nil, keptPath(o, f.name, err)
		}
	}
	if o.metrics != "" {
		if err := checkMetricsFile(o.metrics, o.force); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// badSetting checks the run settings that a checkpoint can also give:
// the flag of the first bad one and what it must be, or "", "".
func badSetting(o *trainOptions) (flagName, msg string) {
	switch {
	case o.epochs < 1:
		return "epochs", fmt.Sprintf("must be at least 1, got %d", o.epochs)
	case !(o.lr > 0) || math.IsInf(o.lr, 0):
		return "lr", fmt.Sprintf("must be a positive number, got %v", o.lr)
	case !(o.valSplit >= 0 && o.valSplit < 1):
		return "validation-split", fmt.Sprintf("must be in [0, 1), got %v", o.valSplit)
	case o.limit < 0:
		return "limit", "must not be negative"
	case o.patience < 0:
		return "patience", "must not be negative"
	}
	return "", ""
}

// learningRate applies the spec's schedule at an optimizer step (counted
// from 1 over the run) of an epoch (counted from 0), in a run of epochs
// epochs of stepsPerEpoch steps. A cosine with WarmupSteps W moves every
// step, as nanoGPT's: lr·s/(W+1) for s ≤ W, then from lr at step W+1 along
// a cosine to MinLR at the run's last step; the other schedules move once
// an epoch.
func learningRate(d Defaults, base float64, step, epoch, epochs, stepsPerEpoch int) float32 {
	if perStepSchedule(d) {
		w, n := d.WarmupSteps, epochs*stepsPerEpoch
		if step <= w {
			return float32(base * float64(step) / float64(w+1))
		}
		r := 1.0
		if n-1 > w {
			r = min(float64(step-1-w)/float64(n-1-w), 1)
		}
		return float32(d.MinLR + (base-d.MinLR)*(1+math.Cos(math.Pi*r))/2)
	}
	switch d.Schedule {
	case "step":
		if d.StepSize > 0 {
			return float32(base * math.Pow(d.Gamma, float64(epoch/d.StepSize)))
		}
	case "cosine":
		if epochs > 1 {
			c := (1 + math.Cos(math.Pi*float64(epoch)/float64(epochs-1))) / 2
			return float32(d.MinLR + (base-d.MinLR)*c)
		}
	}
	return float32(base)
}

// perStepSchedule reports whether the learning rate changes every step
// rather than every epoch (a cosine with warmup).
func perStepSchedule(d Defaults) bool { return d.Schedule == "cosine" && d.WarmupSteps > 0 }

// stepSeed derives the dropout seed of one global step, so that a resumed
// run draws the same masks as an uninterrupted one.
func stepSeed(seed int64, step int) uint64 {
	return mix64(uint64(seed)*0x9E3779B97F4A7C15 + uint64(step))
}

func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

func trainCmd(m Model, args []string, stdout, stderr io.Writer) (err error) {
	meta := m.Meta()
	o, err := parseTrainFlags(meta, args, stdout, stderr)
	if err != nil {
		return err
	}
	o.nodes = *o.nodeFlags["nodes"]
	if err := checkGPUs(m, o); err != nil {
		return err
	}
	if err := checkSyncBN(m, o); err != nil {
		return err
	}
	writes := writesOutputs(m)
	if !writes { // another node of the run: node 0 writes and reports
		o.quiet, o.metrics = true, ""
	}
	// The best weights not yet written (see checkpointPacer) are written
	// however the run ends.
	var best pendingWeights
	defer func() {
		if err == nil || !best.held() {
			return
		}
		if werr := best.write(meta, o.out, o); werr != nil {
			err = fmt.Errorf("%w; and the best weights so far could not be written: %v", err, werr)
		} else {
			fmt.Fprintf(stderr, "note: the best weights so far (epoch %d) are in %s\n", best.epochs, o.out)
		}
	}()
	cpu.SetThreads(o.threads)
	meta.Data.SkipBadImages, meta.Data.Warn = o.skipBadImages, stderr
	ds, err := openTrainSet(meta, o.data, o.limit)
	if err != nil {
		return err
	}
	defer ds.close()
	train, val := ds.split(o.valSplit, o.seed)
	// An optimizer step reads micro batches of B (accumulate), bs samples.
	B, micro := meta.Batch, meta.accumulate()
	bs := B * micro
	if len(train) < bs {
		return fmt.Errorf("%d training images are fewer than one batch of %d", len(train), bs)
	}

	st := trainState{bestVal: math.Inf(1)}
	lastGood := "" // the newest checkpoint known to hold finite weights
	if o.resume != "" {
		if st, err = loadCheckpoint(m, o.resume); err != nil {
			return err
		}
		if ds.text != nil {
			if err := ds.text.sameVocab("--resume", o.resume, st.vocab); err != nil {
				return err
			}
		}
		lastGood = o.resume
		if st.seed != o.seed {
			fmt.Fprintf(stderr, "note: the checkpoint was made with --seed %d; using it\n", st.seed)
			o.seed = st.seed
			train, val = ds.split(o.valSplit, o.seed)
		}
	} else {
		from, f, err := startWeights(m, o)
		if err != nil {
			return err
		}
		if f != nil && ds.text != nil {
			if err := ds.text.sameVocab("--init", f.Path, f.Metadata[mdVocab]); err != nil {
				return err
			}
		}
		kept, err := keepPreprocessing(meta, ds, f)
		if err != nil {
			return err
		}
		if kept {
			from += ", and the preprocessing statistics they were trained with"
		}
		if from != "" && !o.quiet {
			fmt.Fprintln(stdout, from)
		}
	}
	st.run = o // checkpoints keep the run's settings

	var metrics *progress.Metrics
	if o.metrics != "" {
		f, err := os.OpenFile(o.metrics, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("opening metrics file: %v", err)
		}
		defer f.Close()
		metrics = progress.NewMetrics(f)
	}
	// The schedule, the checkpoints' batch and the progress count
	// optimizer steps.
	stepsPerEpoch := len(train) / bs
	if st.batch > stepsPerEpoch {
		return fmt.Errorf("%s stopped after batch %d of epoch %d, but this data set has %d batches per epoch: resume with the --data, --limit and --validation-split of the interrupted run", o.resume, st.batch, st.epoch+1, stepsPerEpoch)
	}
	rep := progress.NewReporter(stdout, o.epochs, stepsPerEpoch, bs)
	rep.Quiet = o.quiet
	rep.NoAccuracy = meta.regression()
	rep.Rate = meta.sampleNoun() + "/s"
	perSample := 1 // what accuracy counts in a sample: a window's T tokens
	if ds.text != nil {
		perSample = ds.text.windowTokens()
		rep.Rate, rep.PerSample = "tokens/s", perSample
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	res, err := residentModel(m, ds, meta.Classes)
	if err != nil {
		return err
	}
	// The weights before each step let a divergence be traced to its op;
	// a model that skips the update on a non-finite loss keeps them itself,
	// and a discrete GPU's are not copied (CostlySnapshot).
	var snapshot []float32
	_, guarded := m.(UpdateGuard)
	afterUpdate := !guarded && costlySnapshot(m)
	if !guarded && !afterUpdate {
		snapshot = make([]float32, len(m.State()))
	}
	loader := newBatchLoader(ds, B)
	defer loader.stop() // before the deferred close of the data set
	rep.Data = func() (int64, time.Duration) { return loader.bytesRead(), loader.waited }
	start := time.Now()
	firstEpoch, lastEpoch := st.epoch, st.epoch
	pacer := checkpointPacer{now: time.Now}
	for epoch := st.epoch; epoch < o.epochs; epoch++ {
		lastEpoch = epoch
		order := epochOrder(train, o.seed, epoch)
		lr := learningRate(meta.Defaults, o.lr, st.step+1, epoch, o.epochs, stepsPerEpoch)
		rep.StartEpoch(epoch + 1)
		var sumLoss float64
		var correct, seen int
		if res != nil {
			if ds.text != nil { // windows drawn as the host-fed loop would
				order = ds.text.residentOrder(st.batch, stepsPerEpoch, bs)
			}
			if sumLoss, correct, seen, err = residentEpoch(res, o, &st, lastGood, order, perSample, epoch, stepsPerEpoch, rep, metrics, sigs); err != nil {
				return err
			}
		} else if st.batch < stepsPerEpoch { // a checkpoint taken after an epoch's last step resumes at its end
			loader.start(order[st.batch*bs : stepsPerEpoch*bs])
		}
		for b := st.batch; res == nil && b < stepsPerEpoch; b++ {
			st.step++
			m.SetRand(stepSeed(o.seed, st.step))
			lr = learningRate(meta.Defaults, o.lr, st.step, epoch, o.epochs, stepsPerEpoch)
			if snapshot != nil {
				copy(snapshot, m.State())
			}
			// The step's loss is the mean of its micro-batches' means, the
			// mean over its B·micro samples.
			var loss float32
			var c int
			n := bs * perSample // the positions accuracy counts
			for k := range micro {
				if err := loader.next(m.TrainInput(), m.TrainLabels()); err != nil {
					return err
				}
				var l float32
				if k < micro-1 {
					l = m.Gradients()
				} else {
					l = m.TrainStep(lr, st.step)
				}
				if !cpu.Finite(l) {
					return divergence(m, snapshot, afterUpdate, st, lastGood, epoch, b, l)
				}
				loss += l / float32(micro)
				if ds.text != nil {
					if k == 0 {
						n = 0
					}
					ck, nk := ds.text.correct(meta, m.TrainOutput(), m.TrainLabels())
					c, n = c+ck, n+nk
				} else {
					c += trainCorrect(meta, m.TrainOutput(), m.TrainLabels())
				}
			}
			sumLoss += float64(loss)
			correct += c
			seen += n
			rep.Step(b+1, sumLoss/float64(b+1-st.batch), float64(correct)/float64(max(seen, 1)))
			if metrics != nil {
				metrics.Write(progress.Event{Event: "step", Epoch: epoch + 1, Step: st.step, Loss: float64(loss), Acc: float64(c) / float64(max(n, 1)), LR: float64(lr)})
			}
			select {
			case <-sigs:
				st.epoch, st.batch = epoch, b+1
				st.seed = o.seed
				if err := nonFiniteWeights(m, st, lastGood, epoch, b); err != nil {
					return err
				}
				if err := saveCheckpoint(m, o.checkpoint, st); err != nil {
					return fmt.Errorf("interrupted, and the checkpoint could not be written: %v", err)
				}
				rep.Interrupted()
				return &interruptedError{o.checkpoint}
			default:
			}
		}
		st.batch = 0
		trainLoss := sumLoss / float64(stepsPerEpoch)
		trainAcc := float64(correct) / float64(max(seen, 1))
		ev := progress.Event{Event: "epoch", Epoch: epoch + 1, Step: st.step, Loss: trainLoss, Acc: trainAcc, LR: float64(lr)}
		improved := true
		if len(val) > 0 {
			r, err := evaluate(m, ds, val, meta)
			if err != nil {
				return err
			}
			ev.ValLoss, ev.ValAcc = r.loss, r.accuracy
			improved = r.loss < st.bestVal
			if improved {
				st.bestVal, st.badEpochs = r.loss, 0
			} else {
				st.badEpochs++
			}
		}
		ev.ImagesPerSec = rep.EndEpoch(ev)
		if metrics != nil {
			metrics.Write(ev)
		}
		if err := nonFiniteWeights(m, st, lastGood, epoch, stepsPerEpoch-1); err != nil {
			return err
		}
		st.epoch = epoch + 1
		st.seed = o.seed
		stopping := o.patience > 0 && st.badEpochs >= o.patience
		if pacer.due() || stopping || st.epoch == o.epochs {
			began := pacer.now()
			if err := saveCheckpoint(m, o.checkpoint, st); err != nil {
				return err
			}
			lastGood = o.checkpoint
			if improved {
				// With a validation split the weights kept are the best ones seen.
				best = pendingWeights{}
				if err := saveWeightsAt(m, o.out, st.epoch, o); err != nil {
					return err
				}
			} else if err := best.write(meta, o.out, o); err != nil {
				return err
			}
			pacer.wrote(began)
			if testHookEpochWrite != nil {
				testHookEpochWrite()
			}
		} else if improved {
			best.hold(m, st.epoch)
		}
		if stopping {
			fmt.Fprintf(stdout, "early stopping: validation loss has not improved for %d epochs (best %.4f)\n", st.badEpochs, st.bestVal)
			break
		}
	}
	elapsed := time.Since(start)
	if !writes {
		fmt.Fprintf(stdout, "%s in %s; node 0 wrote the weights and checkpoint\n", trainedText(firstEpoch, lastEpoch+1, o.epochs, o.resume), progress.FormatDuration(elapsed))
		return nil
	}
	fmt.Fprintf(stdout, "%s in %s; weights in %s, checkpoint in %s\n", trainedText(firstEpoch, lastEpoch+1, o.epochs, o.resume), progress.FormatDuration(elapsed), o.out, o.checkpoint)
	return nil
}

// trainedText says which epochs a run trained: "trained 1 epoch", "trained
// 3 epochs", or, for a resumed run, "trained epochs 7 to 8 of 8 (resumed
// from CKPT)"; first counts from 0 (a resumed epoch's rest counts as the
// epoch), end is one past the last epoch trained.
func trainedText(first, end, epochs int, resumed string) string {
	switch {
	case resumed != "" && end-first == 1:
		return fmt.Sprintf("trained epoch %d of %d (resumed from %s)", end, epochs, resumed)
	case resumed != "":
		return fmt.Sprintf("trained epochs %d to %d of %d (resumed from %s)", first+1, end, epochs, resumed)
	case end-first == 1:
		return "trained 1 epoch"
	}
	return fmt.Sprintf("trained %d epochs", end-first)
}

// divergence explains a non-finite loss: the step, the first op whose
// output stopped being finite, and the last good checkpoint. It restores the
// weights from before the step (the loss was computed from them; before is
// nil when the model's TrainStep left them as they were, see UpdateGuard)
// and runs the forward pass again, op by op, to find where it first
// appeared. With afterUpdate no copy was kept (CostlySnapshot): the
// weights are those after the failing step's update, and the message
// says so.
func divergence(m Model, before []float32, afterUpdate bool, st trainState, lastGood string, epoch, batch int, loss float32) error {
	state := m.State()
	if before != nil {
		copy(state, before)
	}
	where := ""
	for _, p := range m.Meta().Params {
		if i := cpu.NonFinite(state[p.Offset : p.Offset+p.Size]); i >= 0 {
			by := "the update of the step before"
			if afterUpdate {
				by = "this step's update or one before (the weights after the step: a GPU's are not copied before every step)"
			}
			where = fmt.Sprintf("weight %s (element %d = %v), made by %s", p.Name, i, state[p.Offset+i], by)
			break
		}
	}
	if where == "" {
		m.TraceTrainForward(func(layer string, out []float32) bool {
			if i := cpu.NonFinite(out); i >= 0 {
				where = fmt.Sprintf("the output of layer %s (element %d = %v)", layer, i, out[i])
				return false
			}
			return true
		})
	}
	if where == "" {
		where = "the loss (every layer's output was finite)"
	}
	return &nanError{fmt.Sprintf("training diverged at epoch %d, step %d (batch %d): loss is %v; first non-finite value in %s; %s. Try a lower --lr.",
		epoch+1, st.step, batch+1, loss, where, lastGoodText(lastGood))}
}

// lastGoodText names the newest checkpoint of the run that holds finite
// weights, for divergence messages.
func lastGoodText(lastGood string) string {
	if lastGood == "" {
		return "no good checkpoint was written in this run"
	}
	return "the last good checkpoint is " + lastGood + " (continue from it with --resume " + lastGood + ")"
}

// nonFiniteWeights checks every weight before a checkpoint is written, so
// that a checkpoint never holds a NaN or Inf: a loss can stay finite for
// the step whose update overflowed a weight.
func nonFiniteWeights(m Model, st trainState, lastGood string, epoch, batch int) error {
	state := m.State()
	for _, p := range m.Meta().Params {
		if i := cpu.NonFinite(state[p.Offset : p.Offset+p.Size]); i >= 0 {
			return &nanError{fmt.Sprintf("training diverged at epoch %d, step %d (batch %d): the update made weight %s (element %d) %v; %s. Try a lower --lr.",
				epoch+1, st.step, batch+1, p.Name, i, state[p.Offset+i], lastGoodText(lastGood))}
		}
	}
	return nil
}

// countCorrect counts rows whose argmax matches the one-hot label.
func countCorrect(logits, labels []float32, classes int) int {
	n := 0
	for r := 0; r+classes <= len(logits) && r+classes <= len(labels); r += classes {
		if cpu.Argmax(logits[r:r+classes]) == cpu.Argmax(labels[r:r+classes]) {
			n++
		}
	}
	return n
}

// epochOrder is the seeded shuffle of the training indices for one epoch.
func epochOrder(train []int, seed int64, epoch int) []int {
	order := append([]int(nil), train...)
	rng := cpu.NewRand(mix64(uint64(seed)) ^ uint64(epoch+1)*0xD1B54A32D192ED03)
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	return order
}

// initParams fills the state arena as the plan's init rules say.
func initParams(m Model, seed int64) {
	rng := cpu.NewRand(uint64(seed))
	state := m.State()
	for i := range state {
		state[i] = 0
	}
	for _, p := range m.Meta().Params {
		w := state[p.Offset : p.Offset+p.Size]
		switch p.Init {
		case "uniform":
			cpu.FillUniform(w, p.Bound, rng)
		case "ones":
			cpu.Fill(w, 1)
		default:
			cpu.Fill(w, 0)
		}
	}
}

var errNoWeights = errors.New("no weights")

// keptPath adds to an error about --out or --checkpoint, when --resume
// took its path from the checkpoint, where the path came from.
func keptPath(o *trainOptions, flagName string, err error) error {
	key := o.kept[flagName]
	if key == "" {
		return err
	}
	return fmt.Errorf("%v (the path of the interrupted run, kept as %s in %s; give --%s to write elsewhere)", err, key, o.resume, flagName)
}

// accumulate is the number of micro-batches of Batch samples an optimizer
// step reads: Defaults.Accumulate, at least 1.
func (m *Meta) accumulate() int { return max(m.Defaults.Accumulate, 1) }
