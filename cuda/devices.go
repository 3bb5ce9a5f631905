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

// OpenDevices opens GPUs 0 to n−1 of this machine (n 0: every GPU the
// driver sees), each a Device on its own Engine over one Libraries, for a
// process that trains on several GPUs (--gpus N|all). opts.Ordinal is
// ignored. On an error it closes the devices it opened.
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
	switch {
	case n < 0:
		return nil, fmt.Errorf("cuda: %d GPUs asked for", n)
	case have == 0:
		return nil, fmt.Errorf("cuda: the driver sees no GPU: %w", ErrNoDevice)
	case n == 0:
		n = have
	case n > have:
		return nil, fmt.Errorf("cuda: %d GPUs asked for (--gpus %d), but the driver sees %d; ask for %d or fewer, or all", n, n, have, have)
	}
	devs := make([]*Device, 0, n)
	for i := range n {
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
