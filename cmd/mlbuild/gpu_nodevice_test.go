package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCUDAProgramWithoutGPU: a CUDA program on a machine without NVIDIA's
// libraries (forced here with the override variables, which name missing
// files, so the test means the same on a machine with a GPU) answers
// --help, version, info and a command's --help, with info saying in a few
// lines what is missing and where it looked; only the commands that run
// the model fail, with a short message. It once failed all of them with
// the sixty lines of the library search.
func TestCUDAProgramWithoutGPU(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "m")
	if code, out, errOut := mlbuild(t, "compile", "../../testdata/specs/valid/batchnorm_dense.cue", "--backend", "cuda", "-o", bin, "--cache-dir", filepath.Join(dir, "cache")); code != 0 {
		t.Fatalf("compile exited %d:\n%s%s", code, out, errOut)
	}
	env := append(os.Environ(), "MLBUILD_CUDA_LIB="+dir+"/none/libcuda.so.1", "MLBUILD_NVRTC_LIB="+dir+"/none/libnvrtc.so.13",
		"MLBUILD_CUBLAS_LIB="+dir+"/none/libcublas.so.13")
	run := func(args ...string) (int, string, string) {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, stdout.String(), stderr.String()
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--help"}, "Commands:"},
		{[]string{"version"}, "backend cuda"},
		{[]string{"--version"}, "backend cuda"},
		{[]string{"train", "--help"}, "--epochs"},
		{[]string{"help", "predict"}, "--weights"},
		{[]string{"info"}, "device:"},
	} {
		code, out, errOut := run(c.args...)
		if code != 0 || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d, want 0 and %q in the output:\n%s%s", c.args, code, c.want, out, errOut)
		}
	}
	_, info, _ := run("info")
	var device []string
	for _, line := range strings.Split(info, "\n") {
		for _, w := range []string{"device:", "CUDA driver:", "NVRTC:", "cuBLAS:"} {
			if strings.HasPrefix(line, w) {
				device = append(device, line)
			}
		}
	}
	if len(device) != 4 || !strings.Contains(device[0], "NVIDIA's libraries are missing: CUDA driver, NVRTC and cuBLAS") ||
		!strings.Contains(device[1], dir+"/none") || !strings.Contains(device[1], "MLBUILD_CUDA_LIB") {
		t.Errorf("info's device lines: want a summary and one line per missing library naming where it looked, got %q in:\n%s", device, info)
	}
	if !strings.Contains(info, "batchnorm1") {
		t.Errorf("info without a GPU lost the layer table:\n%s", info)
	}
	for _, args := range [][]string{{"train", "--data", dir}, {"selftest"}, {"bench"}} {
		code, out, errOut := run(args...)
		lines := strings.Count(strings.TrimSpace(errOut), "\n") + 1
		if code != 1 || out != "" || lines > 3 || !strings.Contains(errOut, "none is usable here: NVIDIA's libraries are missing") ||
			!strings.Contains(errOut, "--backend cpu") {
			t.Errorf("%v: exit %d with %d lines; want exit 1 and a short message naming what is missing:\n%s%s", args, code, lines, out, errOut)
		}
	}
}
