package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sort"

	"github.com/mlbuild/mlbuild/emit"
)

// goEnvNotKeyed are the settings of `go env` that cannot change the bytes
// `go build -trimpath` produces for mlbuild's generated program: where
// caches, modules and tools live, how the go command fetches (the build is
// offline, GOPROXY=off), telemetry, the host (cross builds are
// reproducible) and the C toolchain (CGO_ENABLED=0). Every other setting
// is a line of the build key, so one that Go adds later is keyed too.
var goEnvNotKeyed = map[string]bool{
	"AR": true, "CC": true, "CXX": true, "GCCGO": true, "PKG_CONFIG": true,
	"CGO_CFLAGS": true, "CGO_CPPFLAGS": true, "CGO_CXXFLAGS": true, "CGO_FFLAGS": true, "CGO_LDFLAGS": true,
	"GOAUTH": true, "GOBIN": true, "GOCACHE": true, "GOCACHEPROG": true, "GOENV": true, "GOEXE": true,
	"GOGCCFLAGS": true, "GOHOSTARCH": true, "GOHOSTOS": true, "GOINSECURE": true, "GOMOD": true,
	"GOMODCACHE": true, "GONOPROXY": true, "GONOSUMDB": true, "GOPATH": true, "GOPRIVATE": true,
	"GOPROXY": true, "GOROOT": true, "GOSUMDB": true, "GOTELEMETRY": true, "GOTELEMETRYDIR": true,
	"GOTMPDIR": true, "GOTOOLDIR": true, "GOVCS": true, "GOWORK": true,
}

// goBuildSettings asks the go command on PATH for the settings its build
// of files for goos/goarch will use: `go env -json` in the environment
// goBuild gives it, so that values from the environment, from `go env -w`
// (the GOENV file) and Go's defaults all count (GOAMD64, GOARM, GOARM64,
// GO386, GOEXPERIMENT, GOFLAGS, GOFIPS140, …). It returns "NAME value"
// pairs, sorted, of the settings that can change the binary.
func goBuildSettings(files []emit.File, goos, goarch string) ([][2]string, error) {
	cmd := exec.Command("go", "env", "-json")
	cmd.Dir = os.TempDir() // no go.mod or go.work of the caller's applies
	cmd.Env = append(os.Environ(), emit.BuildEnv(files, goos, goarch)...)
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
			err = fmt.Errorf("%v: %s", err, ee.Stderr)
		}
		return nil, fmt.Errorf("mlbuild compile needs the Go toolchain (go) on PATH to build the model: go env: %v", err)
	}
	var env map[string]string
	if err := json.Unmarshal(out, &env); err != nil {
		return nil, fmt.Errorf("reading the output of go env -json: %v", err)
	}
	var pairs [][2]string
	for k, v := range env {
		if !goEnvNotKeyed[k] {
			pairs = append(pairs, [2]string{k, v})
		}
	}
	sort.Slice(pairs, func(i, j int) bool { return pairs[i][0] < pairs[j][0] })
	return pairs, nil
}
