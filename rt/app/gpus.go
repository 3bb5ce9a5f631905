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
