package cuda

import (
	"fmt"
	"strings"

	"github.com/mlbuild/mlbuild/rt/gpuhost"
)

// CUdevice_P2PAttribute's values (cuda.h) that info asks of each pair of
// GPUs with cuDeviceGetP2PAttribute.
const (
	P2PPerformanceRank       int32 = 1 // CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK: 0 is the fastest link
	P2PAccessSupported       int32 = 2 // CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED
	P2PNativeAtomicSupported int32 = 3 // CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED
)

// maxLinkGPUs bounds the GPUs whose pairs info lists (28 pairs).
const maxLinkGPUs = 8

// MachineFacts are info's lines about the machine's GPUs as data-parallel
// training sees them (gpuhost.MachineReporter): every GPU the driver
// sees, how each pair is linked, and the NCCL that `train --gpus N` would
// load. The driver does not name a link; peer access with native atomics
// is NVLink's (PCIe peer access lacks them), peer access without them
// PCIe, and no peer access means NCCL's sums go through host memory. One
// GPU loads no NCCL.
func (d *Device) MachineFacts() []gpuhost.Fact {
	l := d.e.lib
	var n int32
	if l.Driver.DeviceGetCount(&n) != Success {
		return nil
	}
	var names []string
	for i := range int(n) {
		var h DeviceHandle
		name := make([]byte, 256)
		if l.Driver.DeviceGet(&h, int32(i)) != Success || l.Driver.DeviceGetName(&name[0], int32(len(name)), h) != Success {
			names = append(names, fmt.Sprintf("%d: ?", i))
			continue
		}
		names = append(names, fmt.Sprintf("%d: %s", i, cString(&name[0])))
	}
	facts := []gpuhost.Fact{{Key: "GPUs", Value: fmt.Sprintf("%d (%s)", n, strings.Join(names, ", "))}}
	if n < 2 {
		return append(facts, gpuhost.Fact{Key: "NCCL", Value: "not loaded: one GPU needs none"})
	}
	for i := 0; i < int(min(n, maxLinkGPUs)); i++ {
		for j := i + 1; j < int(min(n, maxLinkGPUs)); j++ {
			facts = append(facts, gpuhost.Fact{Key: fmt.Sprintf("link %d-%d", i, j), Value: linkText(l, i, j)})
		}
	}
	if n > maxLinkGPUs {
		facts = append(facts, gpuhost.Fact{Key: "links", Value: fmt.Sprintf("the pairs of GPUs 0 to %d shown, of %d", maxLinkGPUs-1, n)})
	}
	if err := l.LoadNCCL(); err != nil {
		return append(facts, gpuhost.Fact{Key: "NCCL", Value: "missing (train --gpus N and --nodes need it): " + err.Error()})
	}
	for _, f := range l.Files {
		if f.Library == ncclLibrary.name {
			return append(facts, gpuhost.Fact{Key: "NCCL", Value: "version " + f.Version + ", " + f.File})
		}
	}
	var v int32 // a table given in Libraries (the fake's)
	if l.NCCL.GetVersion(&v) == NCCLSuccess {
		facts = append(facts, gpuhost.Fact{Key: "NCCL", Value: "version " + ncclVersionString(v)})
	}
	return facts
}

// linkText says how GPUs i and j reach each other.
func linkText(l *Libraries, i, j int) string {
	dr := l.Driver
	if dr.DeviceCanAccessPeer == nil || dr.DeviceGetP2PAttribute == nil {
		return "not reported by this driver"
	}
	var hi, hj DeviceHandle
	if dr.DeviceGet(&hi, int32(i)) != Success || dr.DeviceGet(&hj, int32(j)) != Success {
		return "?"
	}
	var can, atomics, rank int32
	if dr.DeviceCanAccessPeer(&can, hi, hj) != Success {
		return "?"
	}
	if can == 0 {
		return "no peer access: NCCL's sums go through host memory"
	}
	if dr.DeviceGetP2PAttribute(&atomics, P2PNativeAtomicSupported, hi, hj) != Success ||
		dr.DeviceGetP2PAttribute(&rank, P2PPerformanceRank, hi, hj) != Success {
		return "peer access"
	}
	if atomics == 1 {
		return fmt.Sprintf("NVLink (peer access with native atomics, performance rank %d)", rank)
	}
	return fmt.Sprintf("PCIe (peer access without native atomics, performance rank %d)", rank)
}
