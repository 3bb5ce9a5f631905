package app

import (
	"fmt"
	"io"
	"strings"
)

// A GPU program answers help, version and info on any machine: it opens
// its device only for the commands that run the model, and a machine
// without a usable GPU gets a few lines saying what is missing instead of
// a failed start.

// DeviceNeed is what a command line asks of the model's device.
type DeviceNeed int

const (
	// DeviceUnused: help, version, a command's --help and sample read
	// nothing from the device; the program need not open it.
	DeviceUnused DeviceNeed = iota
	// DeviceDescribed: info shows the device's facts when there is one and
	// what is missing when there is none.
	DeviceDescribed
	// DeviceRequired: train, eval, predict, bench and selftest run the
	// model on it.
	DeviceRequired
)

// DeviceNeedOf says what the command line args needs of the device.
func DeviceNeedOf(args []string) DeviceNeed {
	if len(args) == 0 {
		return DeviceUnused
	}
	for _, a := range args {
		if a == "--" {
			break
		}
		switch a {
		case "-h", "-help", "--help":
			return DeviceUnused
		}
	}
	switch args[0] {
	case "help", "version", "-version", "--version", "sample":
		return DeviceUnused
	case "info":
		return DeviceDescribed
	}
	if _, ok := helpOf(args[0]); !ok {
		return DeviceUnused // an unknown command: Run says so
	}
	return DeviceRequired
}

// RunWithoutDevice runs a command line on a machine where the program's
// device cannot be opened; why says what is missing in a few lines, the
// first a summary. Commands that need the device fail with the summary
// and the way to the rest; the others run as usual, info with why in
// place of the device's facts.
func RunWithoutDevice(meta *Meta, why []string, args []string, stdout, stderr io.Writer) int {
	if len(why) == 0 {
		why = []string{"no usable GPU"}
	}
	if DeviceNeedOf(args) == DeviceRequired {
		fmt.Fprintf(stderr, "%s: %s runs the model on the GPU this program was compiled for (backend %s), and none is usable here: %s\n",
			meta.Name, args[0], meta.Backend, why[0])
		fmt.Fprintf(stderr, "%s: '%s info' says where it looked; compile the spec again with --backend cpu to run on the CPU\n", meta.Name, meta.Name)
		return exitFailure
	}
	return Run(&deviceless{meta: meta, why: why}, args, stdout, stderr)
}

// deviceless is the Model of a program whose device is missing: its
// metadata for help, version and info, and facts that say what is
// missing. DeviceNeedOf keeps every command that would run it away.
type deviceless struct {
	meta *Meta
	why  []string
}

func (d *deviceless) DeviceFacts() [][2]string {
	facts := [][2]string{{"device", "none usable: " + d.why[0]}}
	for _, line := range d.why[1:] {
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			k, v = "", line
		}
		facts = append(facts, [2]string{k, v})
	}
	return facts
}

func (d *deviceless) Meta() *Meta { return d.meta }

func (d *deviceless) unusable() {
	panic("the program's device is missing; DeviceNeedOf should have kept this command from running")
}

func (d *deviceless) State() []float32               { d.unusable(); return nil }
func (d *deviceless) TrainInput() []float32          { d.unusable(); return nil }
func (d *deviceless) TrainLabels() []float32         { d.unusable(); return nil }
func (d *deviceless) TrainStep(float32, int) float32 { d.unusable(); return 0 }
func (d *deviceless) Gradients() float32             { d.unusable(); return 0 }
func (d *deviceless) TrainOutput() []float32         { d.unusable(); return nil }
func (d *deviceless) InferInput(bool) []float32      { d.unusable(); return nil }
func (d *deviceless) Infer(bool) []float32           { d.unusable(); return nil }
func (d *deviceless) TraceTrainForward(func(string, []float32) bool) {
	d.unusable()
}
func (d *deviceless) SetRand(uint64)          { d.unusable() }
func (d *deviceless) SelfTest() []SelfTestRow { d.unusable(); return nil }
