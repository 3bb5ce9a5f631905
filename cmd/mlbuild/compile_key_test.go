package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/mlbuild/mlbuild/cache"
)

// TestCompileKeysTheBuiltSource: mlbuild compile emits the program once,
// and its cache key covers that one emission. The files --emit writes are
// the files the key hashes (one "file" line each, with their SHA-256), no
// file carries the key, and the binary reports the key whose action names
// its cache entry, which it got at link time.
func TestCompileKeysTheBuiltSource(t *testing.T) {
	t.Setenv(cache.EnvDebug, "cachekey")
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src")
	bin := filepath.Join(tmp, "iris")
	code, out, errOut := mlbuild(t, "compile", "../../models/iris.cue", "--emit", src, "-o", bin, "--cache-dir", filepath.Join(tmp, "cache"))
	if code != ExitOK {
		t.Fatalf("compile exited %d:\n%s%s", code, out, errOut)
	}
	m := regexp.MustCompile(`cache: action ([0-9a-f]{64}) from key lines:`).FindStringSubmatch(errOut)
	if m == nil {
		t.Fatalf("MLBUILD_DEBUG=cachekey printed no action:\n%s", errOut)
	}
	id, err := cache.ParseActionID(m[1])
	if err != nil {
		t.Fatal(err)
	}
	keyed := map[string]string{} // file -> SHA-256 in the key lines
	for _, line := range strings.Split(errOut, "\n") {
		line, ok := strings.CutPrefix(line, "\t")
		if !ok || !strings.HasPrefix(line, `"file `) {
			continue
		}
		q, err := strconv.QuotedPrefix(line)
		if err != nil {
			t.Fatalf("key line %q: %v", line, err)
		}
		name, _ := strconv.Unquote(q)
		keyed[strings.TrimPrefix(name, "file ")] = strings.TrimSpace(line[len(q):])
	}
	emitted := 0
	err = filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == ".mlbuild-generated" {
			return err
		}
		emitted++
		rel, _ := filepath.Rel(src, path)
		rel = filepath.ToSlash(rel)
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		if want, ok := keyed[rel]; !ok {
			t.Errorf("--emit wrote %s, which the cache key does not cover", rel)
		} else if got := hex.EncodeToString(sum[:]); got != want {
			t.Errorf("%s as --emit wrote it has SHA-256 %s; the key hashed %s", rel, got, want)
		}
		if strings.Contains(string(data), id.Short()) {
			t.Errorf("%s holds the build key %s: the key must come from the source, not go into it", rel, id.Short())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if emitted == 0 || emitted != len(keyed) {
		t.Errorf("--emit wrote %d files, the key covers %d", emitted, len(keyed))
	}
	var info struct {
		BuildKey string `json:"build_key"`
	}
	if err := json.Unmarshal([]byte(runOK(t, bin, "info", "--json")), &info); err != nil {
		t.Fatal(err)
	}
	if info.BuildKey != id.Short() {
		t.Errorf("the binary's info says build key %q, want %q (the action of its cache entry)", info.BuildKey, id.Short())
	}
}
