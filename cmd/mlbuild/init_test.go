package main

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/schema"
)

// TestInitWritesLegalProject checks that init writes the starter spec, the
// module file and every schema file, and that the starter validates.
func TestInitWritesLegalProject(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "proj")
	code, stdout, stderr := specCLI("init", dir)
	if code != ExitOK || stderr != "" || !strings.Contains(stdout, "model.cue") {
		t.Fatalf("init: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	for _, f := range schema.Files() {
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(schema.PkgDir), f.Name))
		if err != nil || string(got) != string(f.Data) {
			t.Errorf("schema file %s not written as embedded (err %v)", f.Name, err)
		}
	}
	mod, err := os.ReadFile(filepath.Join(dir, "cue.mod", "module.cue"))
	if err != nil || !strings.Contains(string(mod), schema.LanguageVersion) {
		t.Errorf("module.cue = %q, %v", mod, err)
	}
	if code, _, stderr := specCLI("validate", filepath.Join(dir, "model.cue")); code != ExitOK {
		t.Errorf("the starter spec is not legal: %s", stderr)
	}
}

// TestInitKeepsEdits checks that init does not overwrite an existing spec
// unless --force is given, and refreshes the schema files either way.
func TestInitKeepsEdits(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "model.cue")
	if err := os.WriteFile(spec, []byte("// mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := specCLI("init", dir)
	if code != ExitUsage || !strings.Contains(stderr, "use --force") {
		t.Errorf("init over a spec: exit %d, stderr %q", code, stderr)
	}
	if got, _ := os.ReadFile(spec); string(got) != "// mine\n" {
		t.Errorf("init overwrote model.cue: %q", got)
	}
	if code, _, stderr := specCLI("init", "--force", dir); code != ExitOK {
		t.Fatalf("init --force: exit %d: %s", code, stderr)
	}
	if got, _ := os.ReadFile(spec); string(got) != starterSpecOf(t, dir, "mnist") {
		t.Errorf("init --force did not write the starter spec")
	}
}

func starterSpecOf(t *testing.T, dir, template string) string {
	t.Helper()
	s, err := starterFor(dir, template)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestInitTemplates checks that every template writes a legal spec of its
// data format, and that an unknown one is a usage error naming them.
func TestInitTemplates(t *testing.T) {
	for template, format := range map[string]string{"mnist": "", "csv": `format:    "csv"`, "regression": `task:      "regression"`, "images": `format:  "imagefolder"`} {
		dir := filepath.Join(t.TempDir(), template+"-proj")
		if code, _, stderr := specCLI("init", "--template", template, dir); code != ExitOK {
			t.Fatalf("init --template %s: exit %d: %s", template, code, stderr)
		}
		got, _ := os.ReadFile(filepath.Join(dir, "model.cue"))
		if !strings.Contains(string(got), format) || !strings.Contains(string(got), `name: "`+strings.ReplaceAll(template, "-", "_")+`_proj"`) {
			t.Errorf("%s: the starter is not of its kind or not named after the folder:\n%s", template, got)
		}
		if code, _, stderr := specCLI("validate", filepath.Join(dir, "model.cue")); code != ExitOK {
			t.Errorf("%s: the starter spec is not legal: %s", template, stderr)
		}
	}
	dir := t.TempDir()
	code, _, stderr := specCLI("init", "--template", "audio", dir)
	if code != ExitUsage || !strings.Contains(stderr, `unknown template "audio"; the templates are csv, images, mnist, regression`) {
		t.Errorf("unknown template: exit %d, %q", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "model.cue")); err == nil {
		t.Error("an unknown template still wrote model.cue")
	}
}

// TestVersion checks the version line's form and that it carries the
// version variable set at link time.
func TestVersion(t *testing.T) {
	old := version
	version = "v1.2.3-test"
	defer func() { version = old }()
	code, stdout, stderr := specCLI("version")
	if code != ExitOK || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	want := "mlbuild v1.2.3-test " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	if stdout != want {
		t.Errorf("version printed %q; want %q", stdout, want)
	}
	if !regexp.MustCompile(`^mlbuild \S+ go\S+ \w+/\w+\n$`).MatchString(stdout) {
		t.Errorf("version line %q has the wrong form", stdout)
	}
	if code, _, _ := specCLI("version", "extra"); code != ExitUsage {
		t.Errorf("version extra: exit %d; want %d", code, ExitUsage)
	}
}
