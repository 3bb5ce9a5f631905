package app

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Replicas is a Model that trains data-parallel on several GPUs of one
// process (rt/gpuhost's Replicated): GPUs is how many.
type Replicas interface {
	Model
	GPUs() int
}

// OutputWriter is a Model that can be one process of a run of several
// (train --nodes, torchrun): only the process of global rank 0 writes
// checkpoints, weights, metrics and progress; the others (WritesOutputs
// false) train in step with it and write nothing.
type OutputWriter interface {
	WritesOutputs() bool
}

// writesOutputs says whether m's process writes the run's files.
func writesOutputs(m Model) bool {
	w, ok := m.(OutputWriter)
	return !ok || w.WritesOutputs()
}

// gpusUsage is train's --gpus help.
const gpusUsage = "train on `N` GPUs (or all), each on a share of every batch (CUDA)"

// nodeFlags are train's flags of a run over several machines, read by
// rt/gpuhost before the command runs (TrainFlagOf); train takes them so
// that they parse, and refuses them where the program cannot use them.
var nodeFlags = []struct{ name, usage string }{
	{"nodes", "train on `N` machines together, each with its --gpus (CUDA; or $WORLD_SIZE)"},
	{"node-rank", "this machine's place `I`, 0 to N-1; node 0 runs the rendezvous (or $RANK)"},
	{"rendezvous", "node 0's `HOST:PORT`, the same on every node (or $MASTER_ADDR, $MASTER_PORT)"},
	{"rendezvous-token", "the shared `SECRET` of 16 or more characters that every node proves it knows (better: $MLBUILD_RENDEZVOUS_TOKEN, which ps does not show)"},
	{"rendezvous-timeout", "how long the nodes wait for each other to start, a `DURATION` (default 5m)"},
}

// parseGPUs reads --gpus: N ≥ 1, or 0 for all.
func parseGPUs(v string) (int, error) {
	if v == "all" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, usageError{fmt.Sprintf("--gpus must be a number of GPUs (1 or more) or all, got %q", v)}
	}
	return n, nil
}

// TrainFlagOf is the value of flag name on a train command line ("" when
// it is not given, or the command is not train), read before the program
// opens its devices; the last of several wins, as for the flag package.
func TrainFlagOf(args []string, name string) string {
	if len(args) == 0 || args[0] != "train" {
		return ""
	}
	v := ""
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		n, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || n != name {
			continue
		}
		if hasVal {
			v = val
		} else if i+1 < len(args) {
			v = args[i+1]
			i++
		}
	}
	return v
}

// GPUsOf is the --gpus of a train command line (1 without one; 0 for
// all), read before the program opens its devices. A malformed value is
// an error; one not given to train is left to the command, which refuses
// the flag.
func GPUsOf(args []string) (int, error) {
	v := TrainFlagOf(args, "gpus")
	if v == "" {
		return 1, nil
	}
	return parseGPUs(v)
}

// checkGPUs holds --gpus to the GPUs the model trains on: rt/gpuhost
// opens them before the command runs (from GPUsOf) and says how the global
// batch is shared. Kept small: every CPU program links it.
func checkGPUs(m Model, o *trainOptions) error {
	have := 1
	if r, ok := m.(Replicas); ok {
		have = r.GPUs()
	}
	if o.gpus != "all" && o.gpus != strconv.Itoa(have) {
		return usageError{"--gpus " + o.gpus + ": this program runs on " + strconv.Itoa(have) + " device(s) here"}
	}
	if _, ok := m.(OutputWriter); ok {
		return nil // one node of several: rt/gpuhost read the flags
	}
	const one = ": this program trains on one machine (only a CUDA program whose spec lets the batch be shared trains on several)"
	if o.nodes != "" && o.nodes != "1" {
		return usageError{"--nodes " + o.nodes + one}
	}
	if ws := os.Getenv("WORLD_SIZE"); ws != "" && ws != "1" && o.nodes == "" {
		return usageError{"WORLD_SIZE=" + ws + " in the environment (torchrun's)" + one + "; unset it to train here alone"}
	}
	for _, f := range nodeFlags[1:] {
		if v := o.nodeFlags[f.name]; v != nil && *v != "" && o.nodes != "1" {
			return usageError{"--" + f.name + " is for a run on several machines (--nodes N), which this program does not make"}
		}
	}
	return nil
}

// SyncBatchNorm is Replicas whose batch norm can take its statistics over
// the global batch, summed across the GPUs at each batch norm layer
// (PyTorch's SyncBatchNorm), instead of each GPU's share.
type SyncBatchNorm interface {
	Replicas
	// SetSyncBN switches it on before training; an error when the model
	// has no batch norm.
	SetSyncBN() error
}

// syncBNUsage is train's --sync-bn help.
const syncBNUsage = "with --gpus N: batch norm's statistics over the global batch, summed across the GPUs, instead of each GPU's share"

// checkSyncBN applies --sync-bn: it needs data-parallel training on
// several GPUs, and a model with batch norm.
func checkSyncBN(m Model, o *trainOptions) error {
	if !o.syncBN {
		return nil
	}
	r, ok := m.(SyncBatchNorm)
	if !ok || r.GPUs() < 2 {
		return usageError{"--sync-bn synchronises batch norm across several GPUs (a CUDA program with --gpus 2 or more); this program trains on one device here, whose batch norm already sees the whole batch"}
	}
	if err := r.SetSyncBN(); err != nil {
		return usageError{err.Error()}
	}
	return nil
}
