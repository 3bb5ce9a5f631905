package gpuhost

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"github.com/mlbuild/mlbuild/rt/app"
	"github.com/mlbuild/mlbuild/rt/cpu"
)

// ErrNoDevice is wrapped by a device's Open error when the machine has no
// usable GPU of its kind (no driver, no device, a missing library).
var ErrNoDevice = errors.New("no GPU")

// Main opens the device, starts the model on it and runs the program's
// command line. Help, version and a command's --help run without opening
// the device; on a machine without a usable GPU, info says briefly what is
// missing and the commands that run the model fail with a short message
// (app.RunWithoutDevice).
func Main(open func() (Device, error), p *Program) {
	args := os.Args[1:]
	need := app.DeviceNeedOf(args)
	if need == app.DeviceUnused {
		os.Exit(app.RunWithoutDevice(p.Meta, nil, args, os.Stdout, os.Stderr))
	}
	d, err := open()
	if errors.Is(err, ErrNoDevice) {
		os.Exit(app.RunWithoutDevice(p.Meta, Brief(err), args, os.Stdout, os.Stderr))
	}
	if err != nil {
		fail(p, err)
	}
	m, err := New(d, p)
	if err != nil {
		fail(p, err)
	}
	code := app.Run(m.App(), args, os.Stdout, os.Stderr)
	if err := d.Close(); err != nil && code == 0 {
		fmt.Fprintf(os.Stderr, "%s: %v\n", p.Meta.Name, err)
		code = 1
	}
	os.Exit(code)
}

// Brief is err in a few lines, the first a summary: the lines of its
// Brief method when it has one (cuda's missing-library error lists every
// place tried, sixty lines and more, in Error), else its first line.
func Brief(err error) []string {
	var b interface{ Brief() []string }
	if errors.As(err, &b) {
		return b.Brief()
	}
	first, _, _ := strings.Cut(err.Error(), "\n")
	return []string{first}
}

// fail reports an error the app.Model interface cannot return (a GPU
// failure in the middle of a command) and exits with the failure code.
func fail(p *Program, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", p.Meta.Name, err)
	if errors.Is(err, ErrNoDevice) && !strings.Contains(err.Error(), "--backend cpu") {
		fmt.Fprintf(os.Stderr, "%s: this binary needs a %s GPU; compile the spec again with --backend cpu to run it on the CPU\n", p.Meta.Name, p.Meta.Backend)
	}
	os.Exit(1)
}

// Model implements app.Model on a Device. Each arena is one device buffer
// and a host copy of it: on unified memory the host copy is the buffer
// itself; on a discrete GPU it is moved only when one side needs what the
// other wrote (hostNewer: the host may have written it since the last
// upload; devNewer: a sequence may have written it since the last
// download).
type Model struct {
	d    Device
	p    *Program
	bufs [ArenaCount]Buffer
	host [ArenaCount][]float32
	// unified is set when every host copy is the device buffer itself.
	unified   bool
	hostNewer [ArenaCount]bool
	devNewer  [ArenaCount]bool
	args      []uint32     // the host copy of ArenaArgs
	stage     [2][]float32 // inference inputs (batch, one) on a discrete GPU
	outStage  [2][]float32 // their outputs, when the device is a Caller
	seed      uint32

	train, grads, evalInfer, oneInfer Sequence
	// The fold sequences of the batch and one-sample inference plans (nil
	// where a plan folds nothing), and whether each plan's folded weights
	// are current (fold.go).
	folds  [2]Sequence
	folded [2]bool
	// The KV-cache decode (decode.go): a position's sequence, and one
	// that also computes its logits; decodeCached is how many leading
	// positions the caches hold.
	decodeStep, decodeToken, decodePrefill Sequence
	decodeCached                           int
	decodeIDs                              []float32
	traces                                 []Sequence // one per training forward step, made on first use

	res     *resident     // nil until the app loads a training set
	feeding bool          // resident kernels write the batch and step arguments
	dp      *dataParallel // a replica of a data-parallel run: its steps are recorded in parts (stepparts.go)

	// freeAtStart is the device's free memory once the kernels were
	// loaded, before the arenas (-1: the device does not say).
	freeAtStart int64
}

// New loads the program's kernels on d (so a compile error shows before any
// work), allocates the arenas and records the plans' sequences.
func New(d Device, p *Program) (*Model, error) {
	if err := d.LoadKernels(p.Source, p.Kernels); err != nil {
		return nil, fmt.Errorf("loading the model's kernels on %s: %w", d.Name(), err)
	}
	m := &Model{d: d, p: p, seed: 1, unified: true, freeAtStart: -1}
	if mr, ok := d.(MemoryReporter); ok {
		if free, err := mr.FreeMemory(); err == nil {
			m.freeAtStart = free
		}
	}
	sizes := [ArenaCount]int{ArenaState: p.StateSize, ArenaTrainWork: p.TrainWorkSize, ArenaEvalWork: p.EvalWorkSize,
		ArenaOneWork: p.OneWorkSize, ArenaTrainInput: p.TrainInputSize, ArenaTrainLabels: p.TrainLabelsSize,
		ArenaArgs: StepArgsLen, ArenaLogits: p.OutputSize, ArenaDecodeWork: p.DecodeWorkSize}
	if err := checkDeviceMemory(d, p, sizes); err != nil {
		return nil, err
	}
	var hostParts []app.MemoryPart
	for a, n := range sizes {
		if a == ArenaDecodeWork && p.Decode == nil {
			m.host[a] = []float32{}
			continue // a program without a KV cache has no such arena
		}
		buf, err := d.Alloc(arenaNames[a], 4*max(n, 1))
		if err != nil {
			return nil, fmt.Errorf("allocating the %s arena (%d bytes): %w", arenaNames[a], 4*max(n, 1), err)
		}
		m.bufs[a] = buf
		if v := d.HostView(buf); v != nil {
			m.host[a] = floats(v)[:n]
		} else {
			m.unified = false
			hostParts = append(hostParts, app.MemoryPart{Name: "host copy of the " + arenaNames[a] + " arena", Bytes: 4 * int64(n)})
		}
	}
	// A discrete GPU's host copies are the program's own memory.
	if avail, source, ok := app.AvailableMemory(); ok && len(hostParts) > 0 {
		if err := app.CheckMemory(p.Meta, "the host copies of the arenas", p.Meta.Batch, hostParts, avail, source); err != nil {
			return nil, err
		}
	}
	for a, n := range sizes {
		if m.host[a] == nil {
			m.host[a] = make([]float32, n)
		}
	}
	m.args = unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(m.host[ArenaArgs]))), StepArgsLen)
	var err error
	if m.train, err = m.record("training step", p.TrainForward, []Op{p.CopyOutput}, p.TrainBackward, p.TrainUpdate); err != nil {
		return nil, err
	}
	// The prediction too: a model that accumulates gradients trains on
	// Gradients for all micro-batches of a step but the last.
	if m.grads, err = m.record("gradients", p.TrainForward, []Op{p.CopyOutput}, p.TrainBackward); err != nil {
		return nil, err
	}
	if err := m.recordFolds(); err != nil {
		return nil, err
	}
	if dc := p.Decode; dc != nil {
		if m.decodeStep, err = m.record("decode position", dc.Step); err != nil {
			return nil, err
		}
		if m.decodeToken, err = m.record("decode token", dc.Step, dc.Last); err != nil {
			return nil, err
		}
		if len(dc.Fills) > 0 {
			if m.decodePrefill, err = m.recordPrefill(); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// DeviceMemoryUsed is how far the device's free memory has fallen since
// the program loaded its kernels: its arenas and whatever the driver and
// libraries allocated for it since (recorded sequences, GEMM workspaces),
// not the context or the kernels themselves, and anything another process
// took meanwhile (app.DeviceMemory: bench reports it).
func (m *Model) DeviceMemoryUsed() (int64, bool) {
	mr, ok := m.d.(MemoryReporter)
	if !ok || m.freeAtStart < 0 {
		return 0, false
	}
	free, err := mr.FreeMemory()
	if err != nil {
		return 0, false
	}
	return max(m.freeAtStart-free, 0), true
}

// checkDeviceMemory refuses, before any allocation, arenas that need more
// than the device reports free (when it can report it).
func checkDeviceMemory(d Device, p *Program, sizes [ArenaCount]int) error {
	mr, ok := d.(MemoryReporter)
	if !ok {
		return nil
	}
	free, err := mr.FreeMemory()
	if err != nil {
		return nil // a device that cannot say refuses nothing; Alloc still reports a shortage
	}
	var parts []app.MemoryPart
	for a, n := range sizes {
		if a == ArenaDecodeWork && p.Decode == nil {
			continue
		}
		parts = append(parts, app.MemoryPart{Name: arenaNames[a], Bytes: 4 * int64(max(n, 1))})
	}
	return app.CheckMemory(p.Meta, "the arenas on "+d.Name(), p.Meta.Batch, parts, free, "free memory of "+d.Name())
}

// floats views little-endian bytes as float32s.
func floats(b []byte) []float32 {
	if len(b) < 4 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}

// bytesOf views float32s as bytes.
func bytesOf(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
}

// DeviceFacts are the device's lines of `info`, the machine's GPUs where
// the device can say (MachineReporter), and the counts of GPUs the
// program trains on.
func (m *Model) DeviceFacts() [][2]string {
	var out [][2]string
	facts := m.d.Facts()
	if r, ok := m.d.(MachineReporter); ok {
		facts = append(facts, r.MachineFacts()...)
	}
	if gpus := m.p.ReplicaGPUs(); len(gpus) > 1 {
		var n []string
		for _, g := range gpus {
			n = append(n, strconv.Itoa(g))
		}
		facts = append(facts, Fact{Key: "data parallel", Value: fmt.Sprintf("train on %s GPUs in all (--gpus, --nodes); the batch of %d is the global batch, each GPU trains on an equal share of it",
			strings.Join(n, ", "), m.p.Meta.Batch)})
	}
	for _, f := range facts {
		out = append(out, [2]string{f.Key, f.Value})
	}
	return out
}

// MachineReporter is a Device that can describe the machine's GPUs for
// data-parallel training in `info`: how many, their links, the collective
// library (CUDA: NCCL, loaded only where there are two GPUs or more).
type MachineReporter interface {
	MachineFacts() []Fact
}

// Device is the device the model runs on.
func (m *Model) Device() Device { return m.d }

// record records a sequence from the ops of plan steps and plain op lists
// ([]PlanStep or []Op); an error names the step and op.
func (m *Model) record(name string, parts ...any) (Sequence, error) {
	return m.d.Record(name, func(enc Encoder) error {
		for _, part := range parts {
			switch part := part.(type) {
			case []PlanStep:
				for i := range part {
					if err := m.encodeStep(enc, &part[i]); err != nil {
						return err
					}
				}
			case []Op:
				for i := range part {
					if err := m.encode(enc, &part[i]); err != nil {
						return fmt.Errorf("%s, op %d: %w", name, i, err)
					}
				}
			default:
				return fmt.Errorf("gpuhost: cannot record a %T", part)
			}
		}
		return nil
	})
}

func (m *Model) encodeStep(enc Encoder, st *PlanStep) error {
	for j := range st.Ops {
		if err := m.encode(enc, &st.Ops[j]); err != nil {
			what := "kernel " + st.Ops[j].Kernel
			switch {
			case st.Ops[j].Gemm != nil:
				what = "GEMM"
			case st.Ops[j].Conv != nil:
				what = st.Ops[j].Conv.Product.String() + " convolution"
			}
			return fmt.Errorf("step %q, op %d (%s): %w", st.Name, j, what, err)
		}
	}
	return nil
}

// encode adds one op (none for a collective point: its sums are the
// step's, stepparts.go).
func (m *Model) encode(enc Encoder, op *Op) error {
	if op.Sum {
		return nil
	}
	if g := op.Gemm; g != nil {
		operand := func(x Matrix, stride int, e Elem) Operand {
			return Operand{Buf: m.bufs[x.Arena], Offset: x.Offset, RowBytes: x.RowBytes, MatrixBytes: stride, Elem: e}
		}
		s := g.Shape
		return enc.Gemm(Gemm{TransA: s.TransA, TransB: s.TransB, M: s.M, N: s.N, K: s.K, Batch: s.Batch, Alpha: s.Alpha, Beta: s.Beta,
			A: operand(g.A, g.MatrixBytes[0], g.Elem), B: operand(g.B, g.MatrixBytes[1], g.Elem), C: operand(g.C, g.MatrixBytes[2], ElemF32), Precision: s.Precision})
	}
	if c := op.Conv; c != nil {
		t := func(b Bind) Tensor { return Tensor{Buf: m.bufs[b.Arena], Offset: b.Offset, Elem: c.Elem} }
		cv := Conv{Geom: c.Geom, Product: c.Product, X: t(c.X), W: t(c.W), Y: t(c.Y), Alpha: c.Alpha, Beta: c.Beta, Precision: c.Precision, NHWC: c.NHWC, Act: c.Act}
		if c.Bias != nil {
			cv.Bias = t(*c.Bias)
		}
		if c.Z != nil {
			cv.Z = t(*c.Z)
		}
		return enc.Conv(cv)
	}
	args := make([]Arg, len(op.Binds))
	for i, b := range op.Binds {
		args[i] = Arg{Buf: m.bufs[b.Arena], Offset: b.Offset, Bytes: b.Bytes}
	}
	return enc.Dispatch(op.Kernel, args, op.Groups, op.Threadgroup)
}

// upload moves every arena the host may have written to the device,
// first writing the weights' bfloat16 twins where the host wrote the
// state.
func (m *Model) upload() error {
	if m.hostNewer[ArenaState] {
		m.writeTwins()
	}
	if m.unified {
		return nil
	}
	for a := range m.bufs {
		if m.hostNewer[a] {
			if err := m.d.Upload(m.bufs[a], 0, bytesOf(m.host[a])); err != nil {
				return fmt.Errorf("copying the %s arena to %s: %w", arenaNames[a], m.d.Name(), err)
			}
			m.hostNewer[a] = false
		}
	}
	return nil
}

// writeTwins writes each weight's bfloat16 twin (Program.BF16Twins) in
// the host's copy of the state arena from the weight there, as the
// update kernels write it: two bfloat16 values a float32 place, the
// first in its low half (little-endian memory), in the weight's order or
// a filter's KRSC order (BF16Twin.KRSC).
func (m *Model) writeTwins() {
	state := m.host[ArenaState]
	for _, t := range m.p.BF16Twins {
		tw, of := state[t.Offset:t.Offset+(t.Of.Size+1)/2], state[t.Of.Offset:t.Of.Offset+t.Of.Size]
		if f := t.KRSC; f != [3]int{} {
			NarrowBF16NHWC(tw, of, f[0], f[1], f[2])
			continue
		}
		NarrowBF16(tw, of)
	}
}

// BF16Bits is x rounded to bfloat16 (to nearest, ties to even, a NaN kept
// quiet), as the top half of a float32: what a kernel's StoreBF16 stores.
func BF16Bits(x float32) uint16 {
	return uint16(math.Float32bits(cpu.RoundBF16(x)) >> 16)
}

// hostView returns an arena's host copy, current with the device; write
// marks it as written by the host.
func (m *Model) hostView(a int, write bool) []float32 {
	if !m.unified && m.devNewer[a] {
		if err := m.d.Download(bytesOf(m.host[a]), m.bufs[a], 0); err != nil {
			fail(m.p, fmt.Errorf("copying the %s arena from %s: %w", arenaNames[a], m.d.Name(), err))
		}
		m.devNewer[a] = false
	}
	if write {
		m.hostNewer[a] = true
		if a == ArenaState {
			m.weightsChanged()
		}
	}
	return m.host[a]
}

// slice returns a region's values as the device has them. On a discrete
// GPU it copies only the region (a loss, an output), not its arena.
func (m *Model) slice(r Region) []float32 {
	v := m.host[r.Arena][r.Offset : r.Offset+r.Size]
	if !m.unified && m.devNewer[r.Arena] {
		if err := m.d.Download(bytesOf(v), m.bufs[r.Arena], 4*r.Offset); err != nil {
			fail(m.p, fmt.Errorf("copying %d values of the %s arena from %s: %w", r.Size, arenaNames[r.Arena], m.d.Name(), err))
		}
	}
	return v
}

// setRegion writes v into a region on the device at once, leaving the rest
// of its arena alone (an inference batch into a work arena).
func (m *Model) setRegion(r Region, v []float32) error {
	copy(m.host[r.Arena][r.Offset:r.Offset+r.Size], v)
	if m.unified {
		return nil
	}
	return m.d.Upload(m.bufs[r.Arena], 4*r.Offset, bytesOf(v))
}

// run launches sequences in order and waits for them: uploads first, and
// afterwards every arena counts as written by the device.
func (m *Model) run(seqs ...Sequence) error {
	if err := m.upload(); err != nil {
		return err
	}
	for _, s := range seqs {
		if err := s.Launch(); err != nil {
			m.touched()
			return err
		}
	}
	err := m.d.Sync()
	m.touched()
	return err
}

// touched marks the arenas that launched sequences may have written: the
// plans' kernels write state, work arenas and the prediction; the kernels
// of device-resident training (feeding set) also the batch and the step
// arguments.
func (m *Model) touched() {
	if m.unified {
		return
	}
	for a := range m.devNewer {
		switch a {
		case ArenaTrainInput, ArenaTrainLabels, ArenaArgs:
			m.devNewer[a] = m.devNewer[a] || m.feeding
		default:
			m.devNewer[a] = true
		}
	}
}

func (m *Model) setArgs(lr float32, step int) {
	args := PackStepArgs(lr, uint32(step), m.seed)
	if !m.devNewer[ArenaArgs] && [StepArgsLen]uint32(m.args) == args {
		return // the device has these already: no copy before an inference
	}
	m.hostView(ArenaArgs, true)
	copy(m.args, args[:])
}

func (m *Model) Meta() *app.Meta  { return m.p.Meta }
func (m *Model) State() []float32 { return m.hostView(ArenaState, true) }

// CostlySnapshot says a discrete GPU's state crosses the bus to be read
// (app.CostlySnapshot): the host-fed loop takes no copy of it every step.
func (m *Model) CostlySnapshot() bool { return !m.unified }

func (m *Model) TrainInput() []float32  { return m.hostView(ArenaTrainInput, true) }
func (m *Model) TrainLabels() []float32 { return m.hostView(ArenaTrainLabels, true) }
func (m *Model) TrainOutput() []float32 { return m.hostView(ArenaLogits, false)[:m.p.OutputSize] }

// TrainStep runs forward, loss, backward and update as one sequence.
func (m *Model) TrainStep(lr float32, step int) float32 {
	m.checkTrainInput()
	m.setArgs(lr, step)
	m.weightsChanged()
	if err := m.run(m.train); err != nil {
		fail(m.p, fmt.Errorf("training step %d: %w", step, err))
	}
	return m.slice(m.p.TrainLoss)[0]
}

// Gradients runs forward, loss and backward as one sequence, without the
// update, and keeps the prediction for TrainOutput.
func (m *Model) Gradients() float32 {
	m.checkTrainInput()
	m.setArgs(0, 1)
	m.weightsChanged() // a training forward updates the running statistics
	if err := m.run(m.grads); err != nil {
		fail(m.p, fmt.Errorf("gradients: %w", err))
	}
	return m.slice(m.p.TrainLoss)[0]
}

// InferInput is where the app writes an inference batch: the region
// itself on unified memory, a staging copy that Infer uploads otherwise.
func (m *Model) InferInput(one bool) []float32 {
	r := m.p.EvalInput
	if one {
		r = m.p.OneInput
	}
	if m.unified {
		return m.host[r.Arena][r.Offset : r.Offset+r.Size]
	}
	return m.staged(&m.stage[b2i(one)], r.Size)
}

// staged returns *s, made first with n values in memory the device pins
// when it can (unpinned memory is only slower: a failure changes no
// result).
func (m *Model) staged(s *[]float32, n int) []float32 {
	if len(*s) != n {
		*s = make([]float32, n)
		if p, ok := m.d.(Pinner); ok {
			_ = p.Pin(bytesOf(*s))
		}
	}
	return *s
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Infer runs an inference plan as one sequence: on a discrete GPU, the
// input region goes up and the output region comes back, nothing else.
func (m *Model) Infer(one bool) []float32 {
	seq, in, out := m.evalInfer, m.p.EvalInput, m.p.EvalOutput
	if one {
		seq, in, out = m.oneInfer, m.p.OneInput, m.p.OneOutput
	}
	m.checkTokens(m.InferInput(one))
	if err := m.fold(one); err != nil {
		fail(m.p, fmt.Errorf("inference: %w", err))
	}
	m.setArgs(0, 0)
	if c, ok := m.d.(Caller); ok && !m.unified {
		return m.call(c, seq, in, out, one)
	}
	if !m.unified {
		if err := m.setRegion(in, m.InferInput(one)); err != nil {
			fail(m.p, fmt.Errorf("inference input: %w", err))
		}
	}
	if err := m.run(seq); err != nil {
		fail(m.p, fmt.Errorf("inference: %w", err))
	}
	return m.slice(out)
}

// call runs an inference on a Caller: the staged input goes up, the
// sequence runs and the output comes back into its own staging copy, with
// one wait. The output arena's host copy is left stale (touched marks it).
func (m *Model) call(c Caller, seq Sequence, in, out Region, one bool) []float32 {
	if err := m.upload(); err != nil {
		fail(m.p, fmt.Errorf("inference: %w", err))
	}
	res := m.staged(&m.outStage[b2i(one)], out.Size)
	err := c.Call(seq,
		[]Transfer{{Buf: m.bufs[in.Arena], Off: 4 * in.Offset, Host: bytesOf(m.InferInput(one))}},
		[]Transfer{{Buf: m.bufs[out.Arena], Off: 4 * out.Offset, Host: bytesOf(res)}})
	m.touched()
	if err != nil {
		fail(m.p, fmt.Errorf("inference: %w", err))
	}
	return res
}

// TraceTrainForward runs the training forward pass one step per sequence,
// handing each step's first output to visit.
func (m *Model) TraceTrainForward(visit func(layer string, out []float32) bool) {
	if m.traces == nil {
		for i := range m.p.TrainForward {
			s, err := m.record("trace "+m.p.TrainForward[i].Name, m.p.TrainForward[i:i+1])
			if err != nil {
				fail(m.p, err)
			}
			m.traces = append(m.traces, s)
		}
	}
	m.checkTrainInput()
	m.weightsChanged()
	for i := range m.p.TrainForward {
		st := &m.p.TrainForward[i]
		if err := m.run(m.traces[i]); err != nil {
			fail(m.p, err)
		}
		if len(st.Check) > 0 && !visit(st.Layer, m.slice(st.Check[0])) {
			return
		}
	}
}

// checkTrainInput checks the training batch's token ids when the host
// wrote it (TrainInput) since its last upload; a batch the resident
// kernels gathered comes from a training set checked as it was loaded.
func (m *Model) checkTrainInput() {
	if m.hostNewer[ArenaTrainInput] {
		m.checkTokens(m.host[ArenaTrainInput])
	}
}

func (m *Model) SetRand(seed uint64) { m.seed = foldSeed(seed) }

// foldSeed is the 32-bit dropout seed of a 64-bit step seed.
func foldSeed(seed uint64) uint32 { return uint32(seed) ^ uint32(seed>>32) }
