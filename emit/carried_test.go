package emit

import (
	"io/fs"
	"path"
	"regexp"
	"testing"

	"github.com/mlbuild/mlbuild"
)

// TestCarriedAssemblyIncludes: every header a carried assembly file
// includes (other than the toolchain's textflag.h) is carried with it, so
// that a produced program's build finds it offline. The runtime's sources
// reach programs only through mlbuild.RuntimeSources' embed patterns.
func TestCarriedAssemblyIncludes(t *testing.T) {
	include := regexp.MustCompile(`(?m)^#include "([^"]+)"`)
	asm, err := fs.Glob(mlbuild.RuntimeSources, "rt/*/*.s")
	if err != nil || len(asm) == 0 {
		t.Fatalf("no assembly embedded (%v)", err)
	}
	headers := 0
	for _, f := range asm {
		files, err := carriedFiles(path.Dir(f))
		if err != nil {
			t.Fatal(err)
		}
		carried := map[string]bool{}
		for _, c := range files {
			carried[c.Path] = true
		}
		src, err := fs.ReadFile(mlbuild.RuntimeSources, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range include.FindAllStringSubmatch(string(src), -1) {
			if m[1] == "textflag.h" {
				continue
			}
			headers++
			if h := path.Join(path.Dir(f), m[1]); !carried[h] {
				t.Errorf("%s includes %s, which programs do not carry (sources.go's embed lacks it)", f, h)
			}
		}
	}
	if headers == 0 {
		t.Fatal("no carried assembly includes a header of its own: the test checks nothing")
	}
}
