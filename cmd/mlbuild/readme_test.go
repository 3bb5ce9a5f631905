package main

// The README's five-minute tour, run as a test: its commands, in order, in
// a fresh folder, with their output checked against what the README shows.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// beMlbuildEnv turns the test binary into the mlbuild command (see the
// init function), so that the tour's shell lines can run `mlbuild`.
const beMlbuildEnv = "MLBUILD_TEST_BE_MLBUILD"

func init() {
	if os.Getenv(beMlbuildEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
}

// tourStep is one `$ command` of the tour, the output the README shows
// for it, and an edit of model.cue the prose asks for before it.
type tourStep struct {
	cmd  string
	want []string
	edit string
}

// layerEdit finds the prose's edits: change the first layer to `...`.
var layerEdit = regexp.MustCompile("change the first layer of `model.cue` to `([^`]+)`")

// parseTour reads the steps of the README's section "A five-minute tour".
func parseTour(readme string) ([]tourStep, error) {
	start := strings.Index(readme, "## A five-minute tour")
	if start < 0 {
		return nil, fmt.Errorf("README.md has no section \"A five-minute tour\"")
	}
	section := readme[start+3:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	var steps []tourStep
	var prose []string
	edit := ""
	inFence := false
	current := -1 // the step whose output the lines are; none at a block's start
	for _, line := range strings.Split(section, "\n") {
		switch {
		case strings.HasPrefix(line, "```"):
			if !inFence {
				if m := layerEdit.FindStringSubmatch(strings.Join(prose, " ")); m != nil {
					edit = m[1]
				}
				prose = nil
			}
			inFence = !inFence
			current = -1
		case !inFence:
			prose = append(prose, line)
		case strings.HasPrefix(line, "$ "):
			steps = append(steps, tourStep{cmd: strings.TrimPrefix(line, "$ "), edit: edit})
			edit = ""
			current = len(steps) - 1
		case current >= 0:
			steps[current].want = append(steps[current].want, line)
		}
	}
	if len(steps) == 0 {
		return nil, fmt.Errorf("the tour has no commands")
	}
	return steps, nil
}

// number matches the figures a run may change: timings, losses, counts.
var number = regexp.MustCompile(`\d[\d.,]*`)

// lineMatcher makes a README output line into a pattern: exact, or with
// every number free when loose.
func lineMatcher(want string, loose bool) *regexp.Regexp {
	want = strings.ReplaceAll(want, "linux/amd64", runtime.GOOS+"/"+runtime.GOARCH)
	if !loose {
		return regexp.MustCompile("^" + regexp.QuoteMeta(want) + "$")
	}
	var b strings.Builder
	last := 0
	for _, m := range number.FindAllStringIndex(want, -1) {
		b.WriteString(regexp.QuoteMeta(want[last:m[0]]))
		b.WriteString(`[\d.,]+`)
		last = m[1]
	}
	b.WriteString(regexp.QuoteMeta(want[last:]))
	return regexp.MustCompile("^" + b.String() + "$")
}

// matchOutput checks got against the README's lines; a line "…" stands
// for any number of lines.
func matchOutput(want []string, got string, loose bool) error {
	lines := strings.Split(strings.TrimRight(got, "\n"), "\n")
	if got == "" {
		lines = nil
	}
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], " ")
	}
	j := 0
	skip := false
	for _, w := range want {
		w = strings.TrimRight(w, " ")
		if w == "…" {
			skip = true
			continue
		}
		re := lineMatcher(w, loose)
		for skip && j < len(lines) && !re.MatchString(lines[j]) {
			j++
		}
		if j >= len(lines) || !re.MatchString(lines[j]) {
			return fmt.Errorf("the README shows %q where the output has %q", w, strings.Join(lines[min(j, len(lines)):], "\n"))
		}
		skip = false
		j++
	}
	if !skip && j < len(lines) {
		return fmt.Errorf("the output goes on beyond what the README shows: %q", strings.Join(lines[j:], "\n"))
	}
	return nil
}

// TestREADMETour walks the README's tour from `mlbuild init` to `predict`
// in a fresh folder, with nothing but what init writes and the MNIST
// files, and checks each command's output against the README.
func TestREADMETour(t *testing.T) {
	data, err := filepath.Abs(mnistDir(t))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	steps, err := parseTour(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(tmp, "bin")
	os.MkdirAll(bin, 0o755)
	script := fmt.Sprintf("#!/bin/sh\n%s=1 exec '%s' \"$@\"\n", beMlbuildEnv, self)
	if err := os.WriteFile(filepath.Join(bin, "mlbuild"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "MNIST="+data,
		"MLBUILD_CACHE_DIR="+filepath.Join(tmp, "cache"), "XDG_CONFIG_HOME="+filepath.Join(tmp, "config"))
	work := filepath.Join(tmp, "work")
	os.MkdirAll(work, 0o755)
	cwd, last := work, 0
	for i, st := range steps {
		if st.edit != "" {
			if err := editFirstLayer(filepath.Join(cwd, "model.cue"), st.edit); err != nil {
				t.Fatalf("before `%s`: %v", st.cmd, err)
			}
		}
		if dir, ok := strings.CutPrefix(st.cmd, "cd "); ok {
			cwd = filepath.Join(cwd, dir)
			continue
		}
		cmd := exec.Command("sh", "-c", fmt.Sprintf("(exit %d); %s", last, st.cmd))
		cmd.Dir, cmd.Env = cwd, env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		last = 0
		if ee, ok := err.(*exec.ExitError); ok {
			last = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("`%s`: %v", st.cmd, err)
		}
		checksCode := i+1 < len(steps) && steps[i+1].cmd == "echo $?"
		if last != 0 && !checksCode {
			t.Fatalf("`%s` exited %d:\n%s", st.cmd, last, out.String())
		}
		loose := strings.HasPrefix(st.cmd, "./") || strings.Contains(st.cmd, "compile")
		if err := matchOutput(st.want, out.String(), loose); err != nil {
			t.Errorf("`%s`: %v", st.cmd, err)
		}
	}
}

// editFirstLayer replaces the first layer of a starter spec with layer,
// keeping the line's indentation, as the tour's prose asks.
func editFirstLayer(path, layer string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		if strings.Contains(l, "{op: ") {
			lines[i] = l[:len(l)-len(strings.TrimLeft(l, "\t "))] + layer
			return os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644)
		}
	}
	return fmt.Errorf("%s has no layer to change", path)
}

// TestTourParser checks the parser on a small tour, so that a README
// whose tour it misreads cannot pass by running nothing.
func TestTourParser(t *testing.T) {
	steps, err := parseTour("# x\n\n## A five-minute tour\n\nchange the first layer of `model.cue` to\n`{op: \"relu\"},` now:\n\n```\n$ a\nout 1\n…\n$ b\n```\n\n```sh\nnot a step\n```\n\n## Next\n```\n$ c\n```\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 2 || steps[0].cmd != "a" || steps[0].edit != `{op: "relu"},` || len(steps[0].want) != 2 || steps[1].cmd != "b" || len(steps[1].want) != 0 {
		t.Errorf("parsed %+v", steps)
	}
	if err := matchOutput([]string{"epoch 1/2 loss 0.5", "…", "done in 3s"}, "epoch 1/2 loss 0.25\nx\ny\ndone in 12s\n", true); err != nil {
		t.Error(err)
	}
	if err := matchOutput([]string{"epoch 1/2"}, "epoch 1/2\nmore\n", true); err == nil {
		t.Error("extra output was accepted")
	}
	if err := matchOutput([]string{"class 7"}, "class 8\n", false); err == nil {
		t.Error("an exact line accepted another number")
	}
}
