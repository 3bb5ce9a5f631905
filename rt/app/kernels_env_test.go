package app

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/rt/cpu"
)

// TestKernelsEnv: MLBUILD_CPU_KERNELS moves the program onto each kernel
// set this machine runs, which info reports, and back to the fastest when
// unset; a set the machine lacks is a usage error that names the ones it
// has, and runs nothing.
func TestKernelsEnv(t *testing.T) {
	defer cpu.SetGemmPath("")
	fastest := cpu.GemmPaths()[0]
	for _, name := range cpu.GemmPaths() {
		t.Setenv(KernelsEnv, name)
		var b bytes.Buffer
		if code := Run(newLinearModel(), []string{"info"}, &b, &b); code != 0 {
			t.Fatalf("%s=%s: info exit %d\n%s", KernelsEnv, name, code, b.String())
		}
		if cpu.GemmPath() != name || !strings.Contains(b.String(), " "+name+" kernels (this machine: ") {
			t.Errorf("%s=%s: the path is %s; info says\n%s", KernelsEnv, name, cpu.GemmPath(), b.String())
		}
	}
	t.Setenv(KernelsEnv, "")
	if code := Run(newLinearModel(), []string{"info"}, new(bytes.Buffer), new(bytes.Buffer)); code != 0 || cpu.GemmPath() != fastest {
		t.Errorf("unset: exit %d, path %s, want %s", code, cpu.GemmPath(), fastest)
	}
	t.Setenv(KernelsEnv, "sse9")
	m := &trainCounter{linearModel: newLinearModel()}
	var b bytes.Buffer
	code := Run(m, []string{"bench", "--iters", "1"}, &b, &b)
	if code != exitUsage || m.calls != 0 || !strings.Contains(b.String(), KernelsEnv+"=sse9") || !strings.Contains(b.String(), "generic") {
		t.Errorf("sse9: exit %d, training calls %d, output %q", code, m.calls, b.String())
	}
}
