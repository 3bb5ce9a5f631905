package schema

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestFiles checks that the embedded files are the folder's .cue files, in
// name order, each of package schema: `mlbuild init` writes exactly these.
func TestFiles(t *testing.T) {
	files := Files()
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
		if !regexp.MustCompile(`(?m)^package schema$`).Match(f.Data) {
			t.Errorf("%s does not declare package schema", f.Name)
		}
		disk, err := os.ReadFile(f.Name)
		if err != nil || string(disk) != string(f.Data) {
			t.Errorf("%s: embedded copy differs from the file (%v)", f.Name, err)
		}
	}
	if strings.Join(names, " ") != "model.cue spec.cue" {
		t.Errorf("embedded files = %v; want model.cue spec.cue", names)
	}
}

// TestLanguageVersionMatchesGoMod checks that the CUE language version the
// module files declare belongs to the cuelang.org/go release mlbuild links.
func TestLanguageVersionMatchesGoMod(t *testing.T) {
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`cuelang.org/go (v\d+\.\d+)\.\d+`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod does not require cuelang.org/go")
	}
	if !strings.HasPrefix(LanguageVersion, string(m[1])+".") {
		t.Errorf("LanguageVersion %s is not of cuelang.org/go %s", LanguageVersion, m[1])
	}
}
