package cache

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGetOrBuild(t *testing.T) {
	t.Setenv(EnvDebug, "")
	c := openTemp(t)
	key := NewKey()
	key.Add("model", "mnist")
	key.Add("plan", strings.Repeat("{}", 100))
	label := Label{Model: "mnist", Backend: "cpu"}
	builds := 0
	build := func(out string) error {
		builds++
		return os.WriteFile(out, []byte("binary of mnist"), 0o755)
	}
	var notes bytes.Buffer
	check := func(wantHit bool, wantBuilds int) Result {
		t.Helper()
		r, err := c.GetOrBuild(key, label, &notes, build)
		if err != nil {
			t.Fatalf("GetOrBuild: %v", err)
		}
		if r.Hit != wantHit || builds != wantBuilds {
			t.Fatalf("hit=%v after %d builds, want hit=%v after %d", r.Hit, builds, wantHit, wantBuilds)
		}
		if got, err := os.ReadFile(r.Path); err != nil || string(got) != "binary of mnist" {
			t.Fatalf("output %q, %v", got, err)
		}
		if r.Entry.ActionID != key.ID() || r.Entry.Label != label || r.Entry.Size != 15 {
			t.Fatalf("entry %+v", r.Entry)
		}
		return r
	}
	r := check(false, 1)
	check(true, 1)
	if notes.Len() != 0 {
		t.Errorf("notes without debug switches: %q", notes.String())
	}

	// A damaged output is noted and rebuilt.
	os.WriteFile(r.Path, []byte("binary of mnisT"), 0o644)
	check(false, 2)
	if want := "cache: entry for " + key.ID().Short() + " was corrupt (hash mismatch); rebuilding\n"; notes.String() != want {
		t.Errorf("notes %q, want %q", notes.String(), want)
	}
	check(true, 2)

	// cachekey prints the key lines.
	notes.Reset()
	t.Setenv(EnvDebug, "other,cachekey")
	check(true, 2)
	want := "cache: action " + key.ID().String() + " from key lines:\n\tmodel mnist\n\tplan sha256:"
	if !strings.HasPrefix(notes.String(), want) {
		t.Errorf("cachekey notes %q, want them to start %q", notes.String(), want)
	}

	// cacheverify rebuilds on a hit and accepts the same bytes...
	t.Setenv(EnvDebug, "cacheverify")
	check(true, 3)
	// ...and rejects different ones.
	_, err := c.GetOrBuild(key, label, &notes, func(out string) error {
		return os.WriteFile(out, []byte("another binary"), 0o755)
	})
	if err == nil || !strings.Contains(err.Error(), "not reproducible") {
		t.Errorf("cacheverify of a different build: %v", err)
	}
	t.Setenv(EnvDebug, "")

	// A failed build returns its own error and stores nothing.
	failKey := NewKey()
	failKey.Add("model", "broken")
	errBuild := errors.New("go build failed")
	if _, err := c.GetOrBuild(failKey, label, &notes, func(string) error { return errBuild }); err != errBuild {
		t.Errorf("failed build: %v, want %v", err, errBuild)
	}
	if _, _, err := c.Get(failKey.ID()); !errors.Is(err, ErrMiss) {
		t.Errorf("failed build left an entry: %v", err)
	}
	if des, _ := os.ReadDir(filepath.Join(c.Dir(), "tmp")); len(des) != 0 {
		t.Errorf("tmp/ holds %d files after GetOrBuild", len(des))
	}
}

// TestUnwritableCacheBuildsUncached: a cache that cannot be written (here
// its tmp/ is a file, which fails for root too; a read-only file system
// fails the same way) still serves its entries, and a miss is built
// outside it with one note instead of failing the compile.
func TestUnwritableCacheBuildsUncached(t *testing.T) {
	c := openTemp(t)
	cached := testID("cached before")
	mustPut(t, c, cached, "old program", Label{})
	tmp := filepath.Join(c.Dir(), tmpDirName)
	if err := os.RemoveAll(tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tmp, []byte("in the way"), 0o644); err != nil {
		t.Fatal(err)
	}
	builds := 0
	build := func(out string) error {
		builds++
		return os.WriteFile(out, []byte("new program"), 0o644)
	}
	key := NewKey()
	key.Add("test", "built while unwritable")
	var notes strings.Builder
	r, err := c.GetOrBuild(key, Label{}, &notes, build)
	if err != nil {
		t.Fatalf("GetOrBuild on an unwritable cache: %v", err)
	}
	if b, err := os.ReadFile(r.Path); err != nil || string(b) != "new program" || !r.Uncached || r.Hit {
		t.Errorf("result %+v holds %q, %v; want the new program, uncached", r, b, err)
	}
	if n := strings.Count(notes.String(), "building without caching"); n != 1 {
		t.Errorf("notes %q: want one note that the build is not cached", notes.String())
	}
	if err := r.Close(); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(r.Path); !os.IsNotExist(err) {
		t.Errorf("Close left the uncached output %s", r.Path)
	}
	if _, _, err := c.Get(key.ID()); err == nil {
		t.Errorf("the uncached build was cached")
	}
	hitKey := NewKey()
	hitKey.Add("test", "cached before")
	r, err = c.GetOrBuild(hitKey, Label{}, &notes, build)
	if err != nil || !r.Hit || r.Uncached || builds != 1 {
		t.Errorf("an entry of the unwritable cache: %+v, %v, %d builds; want a hit", r, err, builds)
	}
	if err := r.Close(); err != nil {
		t.Error(err)
	}
	mustHit(t, c, cached, "old program")
}
