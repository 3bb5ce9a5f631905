package cuda

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/mlbuild/mlbuild/rt/gpuhost"
)

// OpenHostDevice opens the GPU a produced program runs on, as its
// environment chooses:
//
//	MLBUILD_CUDA_DEVICE  the GPU's ordinal (default 0)
//	MLBUILD_CUDA_TF32    refused: the spec's precision ("tf32") replaced it
//	MLBUILD_CUDA_CACHE   the kernel cache folder ("off": none)
//	MLBUILD_CUDA_BLOCKING 1: launch every kernel alone and wait for it, so
//	                     that a GPU fault names its kernel (slow; also
//	                     CUDA_LAUNCH_BLOCKING=1, the variable CUDA users know)
//	MLBUILD_CUDA_PROFILE 1: each sequence's ops launched back to back, not
//	                     as one graph, and each op's GPU time taken
//	                     between events; the table of the ops' times goes
//	                     to standard error at the end
//	MLBUILD_CUDNN_TRIALS how many of cuDNN's proposed algorithms for each
//	                     convolution are timed in a graph when a program
//	                     starts, the fastest kept (default 4, or 1 where
//	                     sequences are blocking; 1: the heuristics' first
//	                     that runs, untimed)
//
// and the library overrides of LoadLibraries.
func OpenHostDevice() (gpuhost.Device, error) {
	opts, err := hostOptions(true)
	if err != nil {
		return nil, err
	}
	d, err := OpenDevice(opts)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// OpenHostReplicas opens GPUs first to first+n−1 (n 0: every one from
// first) for a program's data-parallel training (`train --gpus N`, or one
// member of several under `--nodes` or torchrun, whose LOCAL_RANK is
// first) and loads NCCL; the Clique it returns starts their communicators
// once the id of the run's clique is known. The environment is
// OpenHostDevice's but for MLBUILD_CUDA_DEVICE, which it refuses. Only a
// run on several GPUs calls it, so a program on one GPU never loads NCCL.
func OpenHostReplicas(first, n int) ([]gpuhost.Device, gpuhost.Clique, error) {
	opts, err := hostOptions(false)
	if err != nil {
		return nil, nil, err
	}
	opts.Ordinal = first
	devs, err := OpenDevices(opts, n)
	if err != nil {
		return nil, nil, err
	}
	if err := devs[0].e.lib.LoadNCCL(); err != nil {
		closeAll(devs)
		return nil, nil, fmt.Errorf("training on several GPUs needs NCCL: %w", err)
	}
	ds := make([]gpuhost.Device, len(devs))
	for i := range devs {
		ds[i] = devs[i]
	}
	return ds, &Clique{devs: devs}, nil
}

// Clique is a process's GPUs before their NCCL communicators start, as a
// gpuhost.Clique: the process of global rank 0 makes the clique's id
// (NewID), the rendezvous hands it to the others, and each process starts
// its GPUs as its ranks (Start). NCCL must be loaded in the first
// device's Libraries, which every device shares (or, on the fake, each
// device's own).
type Clique struct{ devs []*Device }

// NewClique is the Clique of devs, devs[i] to become the process's i-th rank.
func NewClique(devs []*Device) *Clique { return &Clique{devs: devs} }

// NewID makes the id of a new clique (ncclGetUniqueId).
func (c *Clique) NewID() ([]byte, error) {
	id, err := NewNCCLID(c.devs[0].e.lib)
	if err != nil {
		return nil, err
	}
	return id.Internal[:], nil
}

// Start makes the GPUs ranks firstRank to firstRank+len−1 of nranks in the
// clique of id (OpenCommunicators), within timeout.
func (c *Clique) Start(id []byte, firstRank, nranks int, timeout time.Duration) ([]gpuhost.Collective, error) {
	var uid NCCLUniqueID
	if len(id) != len(uid.Internal) {
		return nil, fmt.Errorf("cuda: an NCCL id of %d bytes; want %d", len(id), len(uid.Internal))
	}
	copy(uid.Internal[:], id)
	comms, err := OpenCommunicators(c.devs, uid, firstRank, nranks, timeout)
	if err != nil {
		return nil, err
	}
	cs := make([]gpuhost.Collective, len(comms))
	for i := range comms {
		cs[i] = comms[i]
	}
	return cs, nil
}

// Version is the NCCL version loaded, as ncclGetVersion gives it (e.g.
// 22105 for 2.21.5), 0 when it cannot say.
func (c *Clique) Version() int {
	var v int32
	if n := c.devs[0].e.lib.NCCL; n == nil || n.GetVersion(&v) != NCCLSuccess {
		return 0
	}
	return int(v)
}

// StartReplicas starts one NCCL clique over devs, rank i on devs[i], in
// timeout at most, and returns them as the host's devices and
// collectives; on an error it closes the devices.
func StartReplicas(devs []*Device, timeout time.Duration) ([]gpuhost.Device, []gpuhost.Collective, error) {
	c := &Clique{devs: devs}
	id, err := c.NewID()
	if err != nil {
		closeAll(devs)
		return nil, nil, err
	}
	cs, err := c.Start(id, 0, len(devs), timeout)
	if err != nil {
		closeAll(devs)
		return nil, nil, err
	}
	ds := make([]gpuhost.Device, len(devs))
	for i := range devs {
		ds[i] = devs[i]
	}
	return ds, cs, nil
}

// closeAll closes devices after a failed start.
func closeAll(devs []*Device) {
	for _, d := range devs {
		d.Close()
	}
}

// hostOptions reads the environment of OpenHostDevice; one says whether
// MLBUILD_CUDA_DEVICE may choose the GPU.
func hostOptions(one bool) (Options, error) {
	opts := Options{}
	if v := os.Getenv("MLBUILD_CUDA_DEVICE"); v != "" && !one {
		return opts, fmt.Errorf("MLBUILD_CUDA_DEVICE=%q chooses the one GPU of a run; --gpus N takes GPUs 0 to N-1 (CUDA_VISIBLE_DEVICES chooses which they are)", v)
	} else if v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return opts, fmt.Errorf("MLBUILD_CUDA_DEVICE=%q: want a GPU ordinal (0, 1, …)", v)
		}
		opts.Ordinal = n
	}
	if v := os.Getenv("MLBUILD_CUDA_TF32"); v != "" {
		return opts, fmt.Errorf(`MLBUILD_CUDA_TF32=%q: this switch is gone; a GEMM's precision is the spec's now: write precision: "tf32" (or "bf16") in the spec and compile again (mlbuild plan --backend cuda shows each step's), and unset MLBUILD_CUDA_TF32`, v)
	}
	for _, name := range []string{"MLBUILD_CUDA_BLOCKING", "CUDA_LAUNCH_BLOCKING"} {
		switch v := os.Getenv(name); v {
		case "", "0":
		case "1":
			opts.Blocking = true
		default:
			return opts, fmt.Errorf("%s=%q: want 1 (every kernel launched alone and waited for, so a fault names it) or 0 (the default: one CUDA graph a step)", name, v)
		}
	}
	if v := os.Getenv("MLBUILD_CUDNN_TRIALS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return opts, fmt.Errorf("MLBUILD_CUDNN_TRIALS=%q: want how many of cuDNN's algorithms to time for each convolution, 1 or more (1: the heuristics' first, untimed; unset: 4)", v)
		}
		opts.ConvTrials = n
	}
	switch v := os.Getenv("MLBUILD_CUDA_PROFILE"); v {
	case "", "0":
	case "1":
		opts.Blocking, opts.Profile = true, true
	default:
		return opts, fmt.Errorf("MLBUILD_CUDA_PROFILE=%q: want 1 (every op launched on its own, back to back, its GPU time taken between events, and the table of those times written to standard error at the end) or 0 (the default)", v)
	}
	return opts, nil
}
