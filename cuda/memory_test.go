package cuda_test

import (
	"testing"

	"github.com/mlbuild/mlbuild/cuda"
	"github.com/mlbuild/mlbuild/cuda/fakecuda"
	"github.com/mlbuild/mlbuild/rt/gpuhost"
)

// TestFreeMemory: the device reports its free memory (cuMemGetInfo) to
// gpuhost's check, and it falls by what is allocated.
func TestFreeMemory(t *testing.T) {
	d, _, err := openFakeWith(t, fakecuda.Options{Memory: 64 << 20}, cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var mr gpuhost.MemoryReporter = d
	before, err := mr.FreeMemory()
	if err != nil || before <= 0 || before > 64<<20 {
		t.Fatalf("FreeMemory() = %d, %v on a 64 MiB fake", before, err)
	}
	if _, err := d.Alloc("arena", 4096); err != nil {
		t.Fatal(err)
	}
	if after, err := mr.FreeMemory(); err != nil || after > before-4096 {
		t.Errorf("FreeMemory() after a 4096-byte allocation = %d, %v; was %d", after, err, before)
	}
}
