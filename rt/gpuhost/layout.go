package gpuhost

import (
	"math"

	"github.com/mlbuild/mlbuild/rt/cpu"
)

// StepArgs and Ctl layouts common to the generated kernels and the host.
// The kernels emit/gpu generates read and write these words by index and
// the host fills them by the same names: this file is their one copy, which
// the compiler imports (a runtime package never imports the compiler).

// StepArgs is the layout of the small uint32 buffer (ArenaArgs) that
// carries the values that change from one training step to the next, so
// kernels need not be rebuilt: the learning rate (as float32 bits), the
// 1-based step count and the dropout seed. The host fills it once per step
// before encoding; in device-resident training the advance kernel does.
// A KV-cache decode (decode.go) reads the position it computes from
// ArgPos, which the host sets before each launch.
const (
	ArgLR       = 0 // math.Float32bits(learning rate)
	ArgStep     = 1 // optimizer step, starting at 1 (Adam's bias correction)
	ArgSeed     = 2 // dropout seed of the step
	ArgPos      = 3 // the position a decode step computes (0 elsewhere)
	StepArgsLen = 4 // words in the buffer
)

// PackStepArgs returns the StepArgs buffer contents for one step.
func PackStepArgs(lr float32, step, seed uint32) [StepArgsLen]uint32 {
	return [StepArgsLen]uint32{ArgLR: math.Float32bits(lr), ArgStep: step, ArgSeed: seed}
}

// Ctl is the layout of the uint32 control buffer of device-resident
// training (resident.go), which the advance, gather and record kernels
// share: the host writes it at the start of an epoch, record moves
// CtlBatch on after each step.
const (
	CtlBatch = 0 // the batch of the epoch the next step trains on
	CtlLR    = 1 // math.Float32bits(learning rate after the epoch's last batch)
	CtlStep  = 2 // the optimizer step of the epoch's batch 0
	CtlRows  = 3 // rows of the training set on the device
	CtlSteps = 4 // batches in the epoch (the length of seeds)
	CtlLen   = 8 // words in the buffer (three spare)
)

// The step table of device-resident training holds StepWords uint32s a
// batch of the epoch: its dropout seed and its learning rate, so that a
// schedule that changes the rate every step (warmup, cosine) runs on the
// device as on the host.
const (
	StepSeed  = 0 // the batch's 32-bit dropout seed
	StepLR    = 1 // math.Float32bits(the batch's learning rate)
	StepWords = 2
)

// DropoutUniform is the counter-based dropout draw of every GPU program
// (rt/cpu's, the same for the CPU): a uniform float32 in [0, 1) from
// (seed, step, element index), with no state, so that a GPU thread per
// element and the CPU reference draw the same mask. emit/gpu generates the
// same function as kernel code (hashUniformStmts), reading seed and step
// from StepArgs.
func DropoutUniform(seed, step, index uint32) float32 { return cpu.DropoutUniform(seed, step, index) }
