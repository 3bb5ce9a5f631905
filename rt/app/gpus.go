package app

import (
	"fmt"
	"strconv"
	"strings"
)

// Replicas is a Model that trains data-parallel on several GPUs of one
// process (rt/gpuhost's Replicated): GPUs is how many.
type Replicas interface {
	Model
	GPUs() int
}

// gpusUsage is train's --gpus help.
const gpusUsage = "train on `N` GPUs (or all), each on a share of every batch (CUDA)"

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

// GPUsOf is the --gpus of a train command line (1 without one; 0 for
// all), read before the program opens its devices. A malformed value is
// an error; one not given to train is left to the command, which refuses
// the flag.
func GPUsOf(args []string) (int, error) {
	if len(args) == 0 || args[0] != "train" {
		return 1, nil
	}
	v := ""
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "gpus" {
			continue
		}
		if hasVal {
			v = val
		} else if i+1 < len(args) {
			v = args[i+1]
			i++
		}
	}
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
