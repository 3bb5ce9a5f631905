package cuda

import (
	"errors"
	"fmt"
)

// DeviceCount is how many GPUs the driver sees.
func DeviceCount(l *Libraries) (int, error) {
	if err := l.driverError("cuInit", l.Driver.Init(0), "initialising the driver"); err != nil {
		return 0, fmt.Errorf("%w (%w)", err, ErrNoDevice)
	}
	var n int32
	if err := l.driverError("cuDeviceGetCount", l.Driver.DeviceGetCount(&n), ""); err != nil {
		return 0, err
	}
	return int(n), nil
}

// OpenDevices opens GPUs first to first+n−1 of this machine, first being
// opts.Ordinal (0 but under torchrun, whose LOCAL_RANK it is; n 0: every
// GPU the driver sees from first on), each a Device on its own Engine over
// one Libraries, for a process that trains on several GPUs (--gpus
// N|all). On an error it closes the devices it opened.
func OpenDevices(opts Options, n int) ([]*Device, error) {
	if opts.Libraries == nil {
		l, err := LoadLibraries()
		if err != nil {
			return nil, err
		}
		opts.Libraries = l
	}
	have, err := DeviceCount(opts.Libraries)
	if err != nil {
		return nil, err
	}
	first := opts.Ordinal
	switch {
	case n < 0 || first < 0:
		return nil, fmt.Errorf("cuda: %d GPUs from GPU %d asked for", n, first)
	case have == 0:
		return nil, fmt.Errorf("cuda: the driver sees no GPU: %w", ErrNoDevice)
	case first >= have:
		return nil, fmt.Errorf("cuda: GPU %d asked for (LOCAL_RANK=%d), but the driver sees %d (GPUs 0 to %d; CUDA_VISIBLE_DEVICES chooses which)", first, first, have, have-1)
	case n == 0:
		n = have - first
	case first+n > have:
		return nil, fmt.Errorf("cuda: %d GPUs asked for (--gpus %d), but the driver sees %d; ask for %d or fewer, or all", n, n, have, have-first)
	}
	devs := make([]*Device, 0, n)
	for i := first; i < first+n; i++ {
		o := opts
		o.Ordinal = i
		d, err := OpenDevice(o)
		if err != nil {
			var errs []error
			for _, d := range devs {
				errs = append(errs, d.Close())
			}
			return nil, errors.Join(append([]error{fmt.Errorf("cuda: GPU %d of %d: %w", i, n, err)}, errs...)...)
		}
		devs = append(devs, d)
	}
	return devs, nil
}
