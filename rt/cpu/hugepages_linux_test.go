package cpu

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"
)

// TestFloatsAdvisesHugePages checks that a large buffer from Floats is
// zeroed and lies in a mapping the kernel was told to back with huge
// pages (the "hg" flag of /proc/self/smaps), and that a small one is not
// advised.
func TestFloatsAdvisesHugePages(t *testing.T) {
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil {
		t.Skip("this kernel has no transparent huge pages")
	}
	big := Floats(hugeBytes / 4 * 2)
	for i, v := range big {
		if v != 0 {
			t.Fatalf("Floats: element %d is %v, not zero", i, v)
		}
	}
	// The middle of the buffer is page-aligned inside the advised range.
	mid := uintptr(unsafe.Pointer(&big[len(big)/2]))
	if flags := vmFlags(t, mid); !strings.Contains(" "+flags+" ", " hg ") {
		t.Errorf("a %d MiB buffer from Floats lies in a mapping with VmFlags %q: no hg (MADV_HUGEPAGE)", 4*len(big)>>20, flags)
	}
	small := Floats(1024)
	if len(small) != 1024 || cap(small) < 1024 {
		t.Fatalf("Floats(1024) has length %d", len(small))
	}
}

// vmFlags returns the VmFlags line of the mapping of /proc/self/smaps
// that holds addr.
func vmFlags(t *testing.T, addr uintptr) string {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	inside := false
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x", &lo, &hi); n == 2 && strings.Contains(line, " ") && !strings.Contains(line[:strings.Index(line, " ")], ":") {
			inside = lo <= addr && addr < hi
			continue
		}
		if inside && strings.HasPrefix(line, "VmFlags:") {
			return strings.TrimSpace(strings.TrimPrefix(line, "VmFlags:"))
		}
	}
	t.Fatalf("no mapping of /proc/self/smaps holds %#x", addr)
	return ""
}
