package emit

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	"github.com/mlbuild/mlbuild"
)

// CarriedModule is a module that produced programs import besides the
// standard library and mlbuild's own runtime. mlbuild carries it as the
// module zip the Go module proxy serves, and the emitter writes the packages
// of it into the program's vendor/ folder, so `go build` needs neither the
// network nor the module cache: an installed mlbuild builds every backend's
// program offline with only a Go toolchain.
type CarriedModule struct {
	Path    string // module path, e.g. github.com/ebitengine/purego
	Version string // e.g. v0.11.3
	Zip     []byte // the module zip (files under Path@Version/)
}

// Purego is the bridge GPU programs load Metal and CUDA through (dlopen
// and calls into C without cgo).
var Purego = CarriedModule{Path: "github.com/ebitengine/purego", Version: "v0.11.3", Zip: mlbuild.PuregoZip}

// GoMod is go.mod of a generated program that requires mods.
func GoMod(mods ...CarriedModule) []byte {
	var b strings.Builder
	b.WriteString("module " + ModulePath + "\n\ngo 1.22\n")
	if len(mods) > 0 {
		b.WriteString("\nrequire (\n")
		for _, m := range mods {
			fmt.Fprintf(&b, "\t%s %s\n", m.Path, m.Version)
		}
		b.WriteString(")\n")
	}
	return []byte(b.String())
}

// VendorFiles is the vendor/ folder of a program that requires mods:
// vendor/modules.txt and every package's non-test sources (.go, .s, .h)
// and the module's license files. Examples, test data and tools of the
// module are left out.
func VendorFiles(mods ...CarriedModule) ([]File, error) {
	var files []File
	var modules strings.Builder
	for _, m := range mods {
		zr, err := zip.NewReader(bytes.NewReader(m.Zip), int64(len(m.Zip)))
		if err != nil {
			return nil, fmt.Errorf("emit: the carried module %s %s is not a readable zip (a bug in mlbuild's build): %v", m.Path, m.Version, err)
		}
		prefix := m.Path + "@" + m.Version + "/"
		goVersion := ""
		pkgs := map[string]bool{}
		for _, zf := range zr.File {
			name, ok := strings.CutPrefix(zf.Name, prefix)
			if !ok || strings.HasSuffix(zf.Name, "/") {
				continue
			}
			if name == "go.mod" {
				data, err := readZipFile(zf)
				if err != nil {
					return nil, err
				}
				goVersion = goDirective(data)
				continue
			}
			if !vendored(name) {
				continue
			}
			data, err := readZipFile(zf)
			if err != nil {
				return nil, fmt.Errorf("emit: carried module %s %s: %s: %v", m.Path, m.Version, name, err)
			}
			files = append(files, File{Path: path.Join("vendor", m.Path, name), Data: data})
			if strings.HasSuffix(name, ".go") {
				pkgs[path.Join(m.Path, path.Dir(name))] = true
			}
		}
		if goVersion == "" {
			return nil, fmt.Errorf("emit: carried module %s %s has no go directive in its go.mod (a bug in mlbuild's build)", m.Path, m.Version)
		}
		fmt.Fprintf(&modules, "# %s %s\n## explicit; go %s\n", m.Path, m.Version, goVersion)
		names := make([]string, 0, len(pkgs))
		for p := range pkgs {
			names = append(names, p)
		}
		sort.Strings(names)
		for _, p := range names {
			modules.WriteString(p + "\n")
		}
	}
	files = append(files, File{Path: "vendor/modules.txt", Data: []byte(modules.String())})
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}

// vendored reports whether a file of a carried module (path relative to
// the module root) goes into a program's vendor folder: package sources
// and license texts, but not tests, examples, test data or the module's
// own build tooling.
func vendored(name string) bool {
	if strings.HasPrefix(name, "LICENSE") {
		return true
	}
	for _, dir := range strings.Split(path.Dir(name), "/") {
		switch {
		case dir == ".": // the module root
		case dir == "examples", dir == "testdata", dir == "buildtest", strings.HasPrefix(dir, "."), strings.HasPrefix(dir, "_"):
			return false
		}
	}
	base := path.Base(name)
	if strings.HasSuffix(base, "_test.go") {
		return false
	}
	switch path.Ext(base) {
	case ".go", ".s", ".h":
		return true
	}
	return false
}

func readZipFile(zf *zip.File) ([]byte, error) {
	r, err := zf.Open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// goDirective is the version of a go.mod's go line ("1.25.0").
func goDirective(gomod []byte) string {
	for _, line := range strings.Split(string(gomod), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "go "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// BuildEnv is the environment (added to the caller's) in which `go build`
// builds a generated program: no cgo, the target's GOOS and GOARCH, no
// network, no workspace, the local toolchain, and the program's vendor/
// folder for the modules mlbuild carries. The module cache is never read
// for anything, so an empty one builds the same bytes.
func BuildEnv(files []File, goos, goarch string) []string {
	mod := "-mod=mod" // no requirements: nothing to look up
	for _, f := range files {
		if f.Path == "vendor/modules.txt" {
			mod = "-mod=vendor"
			break
		}
	}
	return []string{"CGO_ENABLED=0", "GOOS=" + goos, "GOARCH=" + goarch,
		"GOFLAGS=" + mod, "GOPROXY=off", "GOWORK=off", "GO111MODULE=on", "GOTOOLCHAIN=local"}
}
