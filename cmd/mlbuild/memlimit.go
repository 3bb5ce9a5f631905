package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// memoryLimitHelp is the --memory-limit flag's help, shared by compile and
// plan.
const memoryLimitHelp = "most bytes the model's buffers may take, e.g. 8GiB, 512MB or 0 for no limit (default: this machine's memory)"

// resolveMemoryLimit turns the --memory-limit flag into bytes for
// planner.Options.MemoryLimit: empty means this machine's memory (no
// limit where mlbuild cannot find out), 0 means no limit. A plan that
// needs more fails before any code is generated, naming the figure and the
// layer that dominates it, instead of building a program that cannot run.
func resolveMemoryLimit(flag string) (int64, error) {
	if strings.TrimSpace(flag) == "" {
		return machineMemory(), nil
	}
	n, err := parseByteSize(flag)
	if err != nil {
		return 0, withCode(ExitUsage, fmt.Errorf("--memory-limit: %v", err))
	}
	return n, nil
}

// parseByteSize reads a size such as 1048576, 64KiB, 1.5GiB, 512MB or 2G.
// Binary (KiB, MiB, GiB, TiB) and decimal (KB, MB, GB, TB) units are
// accepted, case-insensitively; a bare K, M, G or T is binary.
func parseByteSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	num := strings.TrimRight(t, "abcdefghijklmnopqrstuvwxyz ")
	unit := strings.TrimSpace(t[len(num):])
	mult := map[string]float64{
		"": 1, "b": 1,
		"k": 1 << 10, "kib": 1 << 10, "kb": 1e3,
		"m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
		"g": 1 << 30, "gib": 1 << 30, "gb": 1e9,
		"t": 1 << 40, "tib": 1 << 40, "tb": 1e12,
	}[unit]
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || mult == 0 || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("%q is not a size: write bytes with an optional unit, e.g. 8GiB, 512MB or 0 for no limit", s)
	}
	b := v * mult
	if b >= math.MaxInt64 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return int64(b), nil
}
