package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testOverwriteOnlyPrograms: -o replaces without --force only a program
// mlbuild produced, recognised by the build information the Go linker
// embeds, never a file that merely holds the generated module's import
// path: a copy of mlbuild itself (this test binary), a generated main.go,
// a note. -o into a folder that does not exist creates it.
func testOverwriteOnlyPrograms(t *testing.T, e *hardEnv) {
	dir := t.TempDir()
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	gen := filepath.Join(dir, "gen")
	if code, out, errOut := hardCLI("compile", e.spec, "--cache-dir", e.cache, "-o", filepath.Join(dir, "tiny"), "--emit", gen); code != ExitOK {
		t.Fatalf("compile --emit: exit %d\n%s%s", code, out, errOut)
	}
	mainGo, err := os.ReadFile(filepath.Join(gen, "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"mlbuild-copy": self,
		"main.go":      mainGo,
		"note.txt":     []byte("remember: the runtime is mlbuildprog/rt/app\n"),
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o755); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := hardCLI("compile", e.spec, "--cache-dir", e.cache, "-o", p)
		if code != ExitIO || !strings.Contains(errOut, "was not made by mlbuild") {
			t.Errorf("-o over %s: exit %d (want %d, refused):\n%s%s", name, code, ExitIO, out, errOut)
		}
		if got, _ := os.ReadFile(p); string(got) != string(data) {
			t.Errorf("-o over %s changed it", name)
		}
	}
	// A program mlbuild produced is replaced without --force.
	if code, out, errOut := hardCLI("compile", e.spec, "--cache-dir", e.cache, "-o", filepath.Join(dir, "tiny")); code != ExitOK {
		t.Errorf("-o over mlbuild's own program: exit %d\n%s%s", code, out, errOut)
	}

	// -o into new folders creates them; under a file it says why not.
	nested := filepath.Join(dir, "new", "deeper", "tiny")
	if code, out, errOut := hardCLI("compile", e.spec, "--cache-dir", e.cache, "-o", nested); code != ExitOK {
		t.Errorf("-o new/deeper/tiny: exit %d\n%s%s", code, out, errOut)
	} else if !madeByMlbuild(nested) {
		t.Errorf("-o new/deeper/tiny wrote no program there")
	}
	under := filepath.Join(dir, "note.txt", "tiny")
	code, out, errOut := hardCLI("compile", e.spec, "--cache-dir", e.cache, "-o", under)
	if code != ExitIO || !strings.Contains(errOut, "cannot create the folder "+filepath.Join(dir, "note.txt")) {
		t.Errorf("-o under a file: exit %d (want %d) saying the folder cannot be made:\n%s%s", code, ExitIO, out, errOut)
	}
}
