package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mlbuild/mlbuild/cache"
)

// cacheCLI runs the CLI in-process and returns its exit code and output.
func cacheCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// fillCache puts two labelled entries into a cache at dir, the second one
// last used three days ago.
func fillCache(t *testing.T, dir string) (recent, old cache.ActionID) {
	t.Helper()
	c, err := cache.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	k := cache.NewKey()
	k.Add("model", "mnist")
	recent = k.ID()
	if _, _, err := c.Put(recent, strings.NewReader(strings.Repeat("b", 3000)), cache.Label{
		Model: "mnist", Backend: "cpu", Target: "linux/amd64", Version: "v0.1.0", GoVersion: "go1.26.8", Source: "models/mnist.cue",
	}); err != nil {
		t.Fatal(err)
	}
	k.Add("target", "darwin/arm64")
	old = k.ID()
	if _, _, err := c.Put(old, strings.NewReader("tiny"), cache.Label{Model: "evil\x1b[31m name", Backend: "metal"}); err != nil {
		t.Fatal(err)
	}
	then := time.Now().Add(-72 * time.Hour)
	os.Chtimes(filepath.Join(dir, old.String()[:2], old.String()+"-a"), then, then)
	return recent, old
}

func TestCacheDir(t *testing.T) {
	t.Setenv(cache.EnvDir, "/from/env")
	if code, out, errs := cacheCLI(t, "cache", "dir"); code != ExitOK || out != "/from/env\n" {
		t.Errorf("cache dir with %s: %d %q %q", cache.EnvDir, code, out, errs)
	}
	if code, out, _ := cacheCLI(t, "cache", "dir", "--cache-dir", "/from/flag"); code != ExitOK || out != "/from/flag\n" {
		t.Errorf("cache dir --cache-dir: %d %q", code, out)
	}
	if _, err := os.Stat("/from/flag"); err == nil {
		t.Errorf("cache dir created the directory")
	}
	t.Setenv(cache.EnvDir, "")
	want, _ := cache.DefaultDir()
	if code, out, _ := cacheCLI(t, "cache", "dir"); code != ExitOK || out != want+"\n" {
		t.Errorf("cache dir by default: %d %q, want %q", code, out, want)
	}
	if code, _, errs := cacheCLI(t, "cache", "dir", "extra"); code != ExitUsage {
		t.Errorf("cache dir extra: exit %d (%s), want %d", code, errs, ExitUsage)
	}
}

func TestCacheLs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	t.Setenv(cache.EnvDir, dir)
	if code, out, _ := cacheCLI(t, "cache", "ls"); code != ExitOK || out != "no entries in "+dir+"\n" {
		t.Errorf("ls of a missing cache: %d %q", code, out)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("ls created the cache")
	}
	recent, old := fillCache(t, dir)
	code, out, errs := cacheCLI(t, "cache", "ls")
	if code != ExitOK {
		t.Fatalf("ls: exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("ls printed %d lines, want header, 2 entries, total:\n%s", len(lines), out)
	}
	header := regexp.MustCompile(`^ACTION +MODEL +BACKEND +TARGET +SIZE +LAST USED +MLBUILD +SOURCE$`)
	row1 := regexp.MustCompile(`^` + recent.Short() + ` +mnist +cpu +linux/amd64 +2\.9 KiB +\d{4}-\d\d-\d\d \d\d:\d\d +v0\.1\.0 +models/mnist\.cue$`)
	row2 := regexp.MustCompile(`^` + old.Short() + ` +"evil\\x1b\[31m name" +metal +- +4 B +\d{4}-\d\d-\d\d \d\d:\d\d +- +-$`)
	for i, re := range []*regexp.Regexp{header, row1, row2} {
		if !re.MatchString(lines[i]) {
			t.Errorf("line %d = %q, want to match %s", i, lines[i], re)
		}
	}
	if want := "2 entries, 2.9 KiB in " + dir; lines[3] != want {
		t.Errorf("total line %q, want %q", lines[3], want)
	}

	code, out, _ = cacheCLI(t, "cache", "ls", "--json", "--cache-dir", dir)
	var list []lsEntry
	if err := json.Unmarshal([]byte(out), &list); code != ExitOK || err != nil {
		t.Fatalf("ls --json: exit %d, %v:\n%s", code, err, out)
	}
	if len(list) != 2 || list[0].ActionID != recent.String() || list[0].Size != 3000 || list[0].GoVersion != "go1.26.8" ||
		list[1].Model != "evil\x1b[31m name" || time.Since(list[1].LastUsed) < 71*time.Hour {
		t.Errorf("ls --json = %+v", list)
	}
	// An empty cache prints an empty array, not null.
	if code, out, _ := cacheCLI(t, "cache", "ls", "--json", "--cache-dir", t.TempDir()); code != ExitOK || strings.TrimSpace(out) != "[]" {
		t.Errorf("ls --json of an empty cache: %d %q", code, out)
	}
	// A file where the cache should be is an I/O error, named.
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	if code, _, errs := cacheCLI(t, "cache", "ls", "--cache-dir", file); code != ExitIO || !strings.Contains(errs, file+" is not a directory") {
		t.Errorf("ls of a file: exit %d, %q", code, errs)
	}
}

func TestCacheTrimAndClean(t *testing.T) {
	dir := t.TempDir()
	recent, old := fillCache(t, dir)
	code, out, errs := cacheCLI(t, "cache", "trim", "--cache-dir", dir, "--max-age", "2d")
	// The removed bytes count the entry file as well as the 4-byte output.
	if code != ExitOK || !regexp.MustCompile(`^removed 1 entry \(\d+ B\) unused for 2d; 1 entry \(2\.9 KiB\) remain\n$`).MatchString(out) {
		t.Errorf("trim: exit %d %q %q", code, out, errs)
	}
	c, err := cache.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Get(old); err == nil {
		t.Errorf("trimmed entry still answers")
	}
	if _, _, err := c.Get(recent); err != nil {
		t.Errorf("recent entry trimmed: %v", err)
	}
	for _, bad := range []string{"five", "-3d", "-1h", "1.5d"} {
		if code, _, errs := cacheCLI(t, "cache", "trim", "--cache-dir", dir, "--max-age", bad); code != ExitUsage || !strings.Contains(errs, "--max-age") {
			t.Errorf("trim --max-age %s: exit %d %q", bad, code, errs)
		}
	}
	code, out, _ = cacheCLI(t, "cache", "trim", "--cache-dir", dir)
	if code != ExitOK || !strings.Contains(out, "removed 0 entries (0 B) unused for 5d; 1 entry") {
		t.Errorf("trim with the default age: %d %q", code, out)
	}

	code, out, errs = cacheCLI(t, "cache", "clean", "--cache-dir", dir)
	if code != ExitOK || !regexp.MustCompile(`^removed 1 entry \(\d\.\d KiB\) from `+regexp.QuoteMeta(dir)+"\n$").MatchString(out) {
		t.Errorf("clean: exit %d %q %q", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "README")); err != nil {
		t.Errorf("clean removed the README: %v", err)
	}
	if code, out, _ := cacheCLI(t, "cache", "ls", "--cache-dir", dir); code != ExitOK || !strings.HasPrefix(out, "no entries") {
		t.Errorf("ls after clean: %d %q", code, out)
	}
	missing := filepath.Join(t.TempDir(), "none")
	for _, sub := range []string{"clean", "trim"} {
		if code, out, _ := cacheCLI(t, "cache", sub, "--cache-dir", missing); code != ExitOK || !strings.Contains(out, "nothing to "+sub) {
			t.Errorf("%s of a missing cache: %d %q", sub, code, out)
		}
		if _, err := os.Stat(missing); err == nil {
			t.Errorf("%s created the cache", sub)
		}
	}
}

func TestParseAge(t *testing.T) {
	for in, want := range map[string]time.Duration{"5d": 120 * time.Hour, "0d": 0, "90m": 90 * time.Minute, "36h": 36 * time.Hour, "0": 0} {
		if got, err := parseAge(in); err != nil || got != want {
			t.Errorf("parseAge(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if got := formatAge(120 * time.Hour); got != "5d" {
		t.Errorf("formatAge(120h) = %q", got)
	}
	if got := formatAge(90 * time.Minute); got != "1h30m0s" {
		t.Errorf("formatAge(90m) = %q", got)
	}
	for _, in := range []string{"", "d", "xd", "-1d", "5 d", "1w"} {
		if _, err := parseAge(in); err == nil {
			t.Errorf("parseAge(%q) accepted it", in)
		}
	}
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 3000: "2.9 KiB", 5 << 20: "5.0 MiB", 3 << 30: "3.0 GiB", 5000 << 30: "5000.0 GiB"} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
