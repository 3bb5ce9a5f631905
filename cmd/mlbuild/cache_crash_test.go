package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mlbuild/mlbuild/cache"
)

// The tests in this file run `mlbuild compile` in child processes: the test
// binary re-runs itself with crashHelperEnv set, and the init function below
// turns it into mlbuild (run with the JSON list of arguments in
// crashArgsEnv) instead of a test run. With crashHelperEnv set to a stage of
// cache.TestHookPut ("output" or "entry"), the child stops there, says so
// on stderr, and waits to be killed; with "none" it just runs.
const (
	crashHelperEnv = "MLBUILD_TEST_CACHE_CRASH_STAGE"
	crashArgsEnv   = "MLBUILD_TEST_CACHE_CRASH_ARGS"
	blockedPrefix  = "test: blocked in Put at stage "
)

func init() {
	stage := os.Getenv(crashHelperEnv)
	if stage == "" {
		return
	}
	var args []string
	if err := json.Unmarshal([]byte(os.Getenv(crashArgsEnv)), &args); err != nil {
		fmt.Fprintf(os.Stderr, "test helper: %s: %v\n", crashArgsEnv, err)
		os.Exit(ExitInternal)
	}
	cache.TestHookPut = func(s string) {
		if s == stage {
			fmt.Fprintf(os.Stderr, "%s%s\n", blockedPrefix, s)
			select {} // until killed
		}
	}
	os.Exit(run(args, os.Stdout, os.Stderr))
}

// compileChild prepares a child mlbuild process running args, stopping in
// Put at stage (or "none").
func compileChild(stage string, args ...string) *exec.Cmd {
	a, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashHelperEnv+"="+stage, crashArgsEnv+"="+string(a), cache.EnvDir+"=")
	return cmd
}

const crashSpec = "../../models/mnist.cue"

// mustCompile compiles crashSpec in-process into out and returns stderr.
func mustCompile(t *testing.T, cacheDir, out string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"compile", crashSpec, "-o", out, "--cache-dir", cacheDir}, &stdout, &stderr); code != ExitOK {
		t.Fatalf("mlbuild compile exited %d:\n%s%s", code, stdout.String(), stderr.String())
	}
	return stderr.String()
}

func sameFile(t *testing.T, a, b string) {
	t.Helper()
	x, errA := os.ReadFile(a)
	y, errB := os.ReadFile(b)
	if errA != nil || errB != nil {
		t.Fatalf("reading binaries: %v, %v", errA, errB)
	}
	if !bytes.Equal(x, y) {
		t.Errorf("%s (%d bytes) and %s (%d bytes) differ", a, len(x), b, len(y))
	}
}

// TestCompileCacheCrashSafety is issue 5's crash test of the cache through
// `mlbuild compile`: two compiles of one spec at once both succeed with
// identical binaries; a compile killed with SIGKILL at either commit point
// of its Put leaves a cache from which the next compile gives the same
// binary; and a corrupted entry is noted on stderr and rebuilt.
func TestCompileCacheCrashSafety(t *testing.T) {
	tmp := t.TempDir()
	ref := filepath.Join(tmp, "ref")
	mustCompile(t, filepath.Join(tmp, "ref-cache"), ref)

	t.Run("two at once", func(t *testing.T) {
		dir := filepath.Join(tmp, "cache-concurrent")
		var cmds []*exec.Cmd
		var outs []*bytes.Buffer
		for i := 0; i < 2; i++ {
			bin := filepath.Join(tmp, fmt.Sprintf("concurrent%d", i))
			cmd := compileChild("none", "compile", crashSpec, "-o", bin, "--cache-dir", dir)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			cmds, outs = append(cmds, cmd), append(outs, &out)
		}
		for i, cmd := range cmds {
			if err := cmd.Wait(); err != nil {
				t.Fatalf("compile %d: %v\n%s", i, err, outs[i])
			}
			sameFile(t, ref, filepath.Join(tmp, fmt.Sprintf("concurrent%d", i)))
		}
		c, err := cache.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if list, err := c.List(); err != nil || len(list) != 1 {
			t.Errorf("cache after two compiles of one spec: %d entries, %v", len(list), err)
		}
	})

	for _, stage := range []string{"output", "entry"} {
		t.Run("killed at "+stage, func(t *testing.T) {
			dir := filepath.Join(tmp, "cache-killed-"+stage)
			bin := filepath.Join(tmp, "killed-"+stage)
			cmd := compileChild(stage, "compile", crashSpec, "-o", bin, "--cache-dir", dir)
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			blocked := make(chan string, 1)
			var said strings.Builder
			go func() {
				sc := bufio.NewScanner(stderr)
				for sc.Scan() {
					said.WriteString(sc.Text() + "\n")
					if strings.HasPrefix(sc.Text(), blockedPrefix) {
						blocked <- sc.Text()
						return
					}
				}
				close(blocked)
			}()
			select {
			case _, ok := <-blocked:
				if !ok {
					cmd.Wait()
					t.Fatalf("compile ended without reaching stage %s:\n%s", stage, said.String())
				}
			case <-time.After(3 * time.Minute):
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("compile did not reach stage %s in 3 minutes", stage)
			}
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()
			if _, err := os.Stat(bin); err == nil {
				t.Errorf("a compile killed in Put wrote its -o binary")
			}
			// The cache holds no entry (nothing was committed) or, never,
			// garbage; the next compile builds and installs the same bytes.
			c, err := cache.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			if list, _ := c.List(); len(list) != 0 {
				t.Errorf("killed compile left %d entries", len(list))
			}
			if notes := mustCompile(t, dir, bin); strings.Contains(notes, "corrupt") {
				t.Errorf("compile after a kill reported corruption: %s", notes)
			}
			sameFile(t, ref, bin)
		})
	}

	t.Run("corrupt entry", func(t *testing.T) {
		dir := filepath.Join(tmp, "cache-corrupt")
		bin := filepath.Join(tmp, "corrupt")
		mustCompile(t, dir, bin)
		c, err := cache.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		list, err := c.List()
		if err != nil || len(list) != 1 {
			t.Fatalf("cache after one compile: %d entries, %v", len(list), err)
		}
		p := c.OutputPath(list[0].OutputID)
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		data[len(data)/2] ^= 1
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		notes := mustCompile(t, dir, bin)
		want := "cache: entry for " + list[0].ActionID.Short() + " was corrupt (hash mismatch); rebuilding"
		if !strings.Contains(notes, want) {
			t.Errorf("stderr %q, want the note %q", notes, want)
		}
		sameFile(t, ref, bin)
		if _, _, err := c.Get(list[0].ActionID); err != nil {
			t.Errorf("entry not repaired: %v", err)
		}
	})
}
