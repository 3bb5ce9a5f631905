package cuda_test

import (
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/cuda"
	"github.com/mlbuild/mlbuild/cuda/fakecuda"
)

// TestMachineFacts: info's lines about the machine's GPUs. One GPU lists
// itself and loads no NCCL; three list every pair's link (the fake's are
// PCIe-like: peer access without native atomics) and the NCCL version;
// two without NCCL say where it was looked for.
func TestMachineFacts(t *testing.T) {
	facts := func(devices int, nccl bool) (map[string]string, *cuda.Libraries) {
		t.Helper()
		f := fakecuda.New(fakecuda.Options{WorkDir: fakeWorkDir, Devices: devices, Name: "Fake GPU"})
		libs := f.Libraries()
		if nccl {
			w := fakecuda.NewNCCLWorld()
			t.Cleanup(func() { w.Close() })
			libs.NCCL = f.NCCL(w)
		}
		d, err := cuda.OpenDevice(cuda.Options{Libraries: libs, KernelCacheDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		m := map[string]string{}
		for _, f := range d.MachineFacts() {
			m[f.Key] = f.Value
		}
		return m, libs
	}
	one, libs := facts(1, false)
	if one["GPUs"] != "1 (0: Fake GPU)" || one["NCCL"] != "not loaded: one GPU needs none" || libs.NCCL != nil {
		t.Errorf("one GPU: %v (NCCL loaded: %v)", one, libs.NCCL != nil)
	}
	three, _ := facts(3, true)
	for _, k := range []string{"link 0-1", "link 0-2", "link 1-2"} {
		if !strings.HasPrefix(three[k], "PCIe (peer access without native atomics") {
			t.Errorf("three GPUs: %s is %q", k, three[k])
		}
	}
	if !strings.HasPrefix(three["GPUs"], "3 (0: Fake GPU, 1: Fake GPU, 2: Fake GPU)") || !strings.HasPrefix(three["NCCL"], "version 2.") {
		t.Errorf("three GPUs: %v", three)
	}
	t.Setenv("MLBUILD_NCCL_LIB", t.TempDir()+"/libnccl.so.2")
	two, _ := facts(2, false)
	if !strings.HasPrefix(two["NCCL"], "missing (train --gpus N and --nodes need it): ") || !strings.Contains(two["NCCL"], "libnccl.so.2") {
		t.Errorf("two GPUs without NCCL: %q", two["NCCL"])
	}
}
