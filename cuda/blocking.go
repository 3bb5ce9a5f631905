package cuda

import (
	"fmt"

	"github.com/mlbuild/mlbuild/rt/gpuhost"
)

// Blocking sequences (Options.Blocking, MLBUILD_CUDA_BLOCKING=1) are the
// debugging form of a recorded sequence. A CUDA graph reports a fault of
// any of its kernels only as the graph's failure, at the next wait; a
// blocking sequence keeps its ops as a list, checked exactly as for a
// graph, and each Launch runs them one by one, waiting after each, so the
// fault comes back from the op that hit it, with its kernel's name.

// recordBlocking records a blocking sequence: encode's ops are checked and
// kept, nothing runs.
func (d *Device) recordBlocking(name string, enc *encoder, encode func(gpuhost.Encoder) error) (gpuhost.Sequence, error) {
	d.recording = name
	err := func() error {
		defer func() { d.recording = "" }()
		return encode(enc)
	}()
	if err != nil {
		return nil, fmt.Errorf("cuda: recording sequence %q: %w", name, err)
	}
	return d.keep(&sequence{d: d, name: name, blocking: true, ops: enc.kept}, enc.used), nil
}

// launchBlocking runs a blocking sequence's ops, each launched alone and
// waited for; the first failure names its op. With Options.Profile they
// run back to back and timed instead (launchTimed, profile.go).
func (s *sequence) launchBlocking() error {
	d := s.d
	if d.e.opts.Profile {
		return s.launchTimed()
	}
	for _, op := range s.ops {
		err := op.launch()
		if err == nil {
			err = d.e.Synchronize()
		}
		if err != nil {
			return fmt.Errorf("cuda: %s failed in sequence %q at %s (of its %d ops, each launched alone: MLBUILD_CUDA_BLOCKING): %w",
				d.e.Name(), s.name, op.name, len(s.ops), err)
		}
	}
	s.runs++
	return nil
}
