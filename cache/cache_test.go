package cache

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// helperEnv switches the test binary into a helper process (see TestMain):
// the multi-process and kill -9 tests re-run this binary with it set.
const helperEnv = "MLBUILD_CACHE_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		if err := runHelper(mode); err != nil {
			fmt.Fprintf(os.Stderr, "helper %s: %v\n", mode, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runHelper is the body of a helper process. Its settings come from the
// environment: HELPER_DIR (the cache), HELPER_PROC (its number), HELPER_N
// (iterations), HELPER_STAGE (where put-block stops).
func runHelper(mode string) error {
	c, err := Open(os.Getenv("HELPER_DIR"))
	if err != nil {
		return err
	}
	switch mode {
	case "put":
		proc, _ := strconv.Atoi(os.Getenv("HELPER_PROC"))
		n, _ := strconv.Atoi(os.Getenv("HELPER_N"))
		return putWorkload(c, proc, n)
	case "put-block":
		stage := os.Getenv("HELPER_STAGE")
		TestHookPut = func(s string) {
			if s == stage {
				fmt.Println("ready")
				os.Stdout.Sync()
				select {} // wait here to be killed
			}
		}
		_, _, err := c.Put(testID("victim"), strings.NewReader(newContent), Label{Model: "victim"})
		if err != nil {
			return err
		}
		return fmt.Errorf("Put returned without reaching stage %q", stage)
	}
	return fmt.Errorf("unknown helper mode %q", mode)
}

const (
	oldContent = "old binary\n"
	newContent = "new binary, longer than the old one\n"
)

func testID(name string) ActionID {
	k := NewKey()
	k.Add("test", name)
	return k.ID()
}

// sharedContent is what every writer of key "shared-i" puts: a build is
// deterministic, so all writers agree. It is large enough that writes of
// several processes overlap.
func sharedContent(i int) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("shared output %d\n", i)), 4000)
}

// putWorkload puts, n times, a key shared by every worker (same bytes), a
// key of its own, and a key shared by every worker with bytes of its own
// (an undeterministic build), reading each shared key back at once.
func putWorkload(c *Cache, proc, n int) error {
	for i := 0; i < n; i++ {
		shared := testID(fmt.Sprintf("shared-%d", i))
		if _, _, err := c.Put(shared, bytes.NewReader(sharedContent(i)), Label{Model: "shared"}); err != nil {
			return err
		}
		own := testID(fmt.Sprintf("own-%d-%d", proc, i))
		if _, _, err := c.Put(own, strings.NewReader(fmt.Sprintf("own %d %d", proc, i)), Label{}); err != nil {
			return err
		}
		racy := testID("racy")
		if _, _, err := c.Put(racy, strings.NewReader(fmt.Sprintf("racy from %d", proc)), Label{}); err != nil {
			return err
		}
		_, path, err := c.Get(shared)
		if err != nil {
			return fmt.Errorf("Get(shared-%d) right after Put: %v", i, err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, sharedContent(i)) {
			return fmt.Errorf("shared-%d: read %d bytes, not what was put", i, len(got))
		}
		if _, path, err = c.Get(racy); err != nil {
			return fmt.Errorf("Get(racy): %v", err)
		}
		if got, err := os.ReadFile(path); err != nil || !strings.HasPrefix(string(got), "racy from ") {
			return fmt.Errorf("racy: read %q, %v", got, err)
		}
	}
	return nil
}

func openTemp(t *testing.T) *Cache {
	t.Helper()
	c, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustPut(t *testing.T, c *Cache, id ActionID, content string, l Label) OutputID {
	t.Helper()
	out, size, err := c.Put(id, strings.NewReader(content), l)
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	if size != int64(len(content)) {
		t.Fatalf("Put size = %d, want %d", size, len(content))
	}
	return out
}

// mustHit asserts that Get(id) hits with content and returns the entry.
func mustHit(t *testing.T, c *Cache, id ActionID, content string) Entry {
	t.Helper()
	e, path, err := c.Get(id)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != content {
		t.Fatalf("Get returned %q, want %q", got, content)
	}
	return e
}

// missReason asserts that err is a *MissError and returns it.
func missOf(t *testing.T, err error) *MissError {
	t.Helper()
	var me *MissError
	if !errors.As(err, &me) || !errors.Is(err, ErrMiss) {
		t.Fatalf("want a *MissError, have %v", err)
	}
	return me
}

func TestOpenLayout(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.Dir() != dir {
		t.Errorf("Dir() = %s, want %s", c.Dir(), dir)
	}
	for _, sub := range []string{"00", "7f", "ff", "tmp"} {
		if fi, err := os.Stat(filepath.Join(dir, sub)); err != nil || !fi.IsDir() {
			t.Errorf("%s: %v", sub, err)
		}
	}
	readme, err := os.ReadFile(filepath.Join(dir, "README"))
	if err != nil || !strings.Contains(string(readme), "mlbuild's build cache") {
		t.Errorf("README: %q, %v", readme, err)
	}
	// Reopening is fine; a file in the way is an error, not a panic.
	if _, err := Open(dir); err != nil {
		t.Errorf("reopen: %v", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, []byte("x"), 0o644)
	if _, err := Open(file); err == nil {
		t.Errorf("Open of a plain file succeeded")
	}
	if _, err := Open(""); err == nil {
		t.Errorf("Open(\"\") succeeded")
	}
}

func TestDefaultDir(t *testing.T) {
	t.Setenv(EnvDir, "/some/where")
	if d, err := DefaultDir(); err != nil || d != "/some/where" {
		t.Errorf("with %s set: %q, %v", EnvDir, d, err)
	}
	t.Setenv(EnvDir, "")
	t.Setenv("XDG_CACHE_HOME", "/xdg")
	t.Setenv("HOME", "/home/u")
	d, err := DefaultDir()
	base, berr := os.UserCacheDir()
	if berr != nil || err != nil || d != filepath.Join(base, "mlbuild") {
		t.Errorf("DefaultDir() = %q, %v; want %s/mlbuild", d, err, base)
	}
}

func TestPutGetRoundTrip(t *testing.T) {
	c := openTemp(t)
	id := testID("round trip")
	label := Label{Model: "mnist", Backend: "cpu", Target: "linux/amd64", Version: "v0.1.0", GoVersion: "go1.26.8", Source: "models/mnist.cue"}
	before := time.Now()
	out := mustPut(t, c, id, "binary bytes", label)
	e := mustHit(t, c, id, "binary bytes")
	if e.ActionID != id || e.OutputID != out || e.Size != 12 || e.Label != label {
		t.Errorf("entry = %+v", e)
	}
	if e.Time.Before(before.Add(-time.Second)) || e.Time.After(time.Now()) {
		t.Errorf("entry time %v is not about now", e.Time)
	}
	if h, n, err := HashFile(c.OutputPath(out)); err != nil || h != out || n != 12 {
		t.Errorf("HashFile = %s, %d, %v", h, n, err)
	}
	// Put replaces; PutFile reads a file.
	src := filepath.Join(t.TempDir(), "bin")
	os.WriteFile(src, []byte("second build"), 0o755)
	if _, _, err := c.PutFile(id, src, label); err != nil {
		t.Fatal(err)
	}
	mustHit(t, c, id, "second build")
	if _, _, err := c.PutFile(id, filepath.Join(t.TempDir(), "absent"), label); err == nil {
		t.Errorf("PutFile of a missing file succeeded")
	}
	// An empty output is a valid output.
	mustPut(t, c, testID("empty"), "", Label{})
	mustHit(t, c, testID("empty"), "")
	// Nothing is left in tmp/.
	if des, _ := os.ReadDir(filepath.Join(c.Dir(), "tmp")); len(des) != 0 {
		t.Errorf("tmp/ holds %d files after Puts", len(des))
	}
}

func TestGetUnknownIsPlainMiss(t *testing.T) {
	c := openTemp(t)
	_, path, err := c.Get(testID("never put"))
	me := missOf(t, err)
	if me.Corrupt || path != "" {
		t.Errorf("unknown id: %+v, path %q", me, path)
	}
	if !strings.Contains(err.Error(), "no entry for") {
		t.Errorf("message %q", err)
	}
}

func TestLabelsRoundTrip(t *testing.T) {
	c := openTemp(t)
	long := strings.Repeat("é", 100) // 200 bytes: cut to 128 on a rune boundary
	label := Label{Model: "a model=x&y", Backend: "cpu\nmetal", Target: "linux/arm64", Source: "dir with space/m.cue", Version: long}
	id := testID("labels")
	mustPut(t, c, id, "x", label)
	e := mustHit(t, c, id, "x")
	want := label
	want.Version = strings.Repeat("é", 64)
	if e.Label != want {
		t.Errorf("label = %+v\nwant %+v", e.Label, want)
	}
	data, _ := os.ReadFile(c.entryPath(id))
	if bytes.Count(data, []byte("\n")) != 1 {
		t.Errorf("entry is not one line: %q", data)
	}
}

// checked is an entry line with its checksum and newline, as Put writes it.
func checked(line string) []byte {
	return []byte(line + " " + checkPrefix + entryCheck([]byte(line)) + "\n")
}

func TestCorruptionIsMissAndPutRepairs(t *testing.T) {
	// 66 bytes; each case replaces its tail by its name to own its output.
	content := "the compiled model binary\n" + strings.Repeat(".", 40)
	other := testID("another action")
	cases := []struct {
		name   string
		damage func(c *Cache, id ActionID, out OutputID) error
		reason string
	}{
		{"flipped byte in output", func(c *Cache, id ActionID, out OutputID) error {
			p := c.OutputPath(out)
			b, _ := os.ReadFile(p)
			b[5] ^= 0x20
			return os.WriteFile(p, b, 0o644)
		}, "hash mismatch"},
		{"truncated output", func(c *Cache, id ActionID, out OutputID) error {
			return os.Truncate(c.OutputPath(out), 7)
		}, "output has 7 bytes, entry says 66"},
		{"missing output", func(c *Cache, id ActionID, out OutputID) error {
			return os.Remove(c.OutputPath(out))
		}, "output file missing"},
		{"output is a folder", func(c *Cache, id ActionID, out OutputID) error {
			p := c.OutputPath(out)
			os.Remove(p)
			return os.MkdirAll(filepath.Join(p, "sub"), 0o777)
		}, "not a regular file"},
		{"truncated entry", func(c *Cache, id ActionID, out OutputID) error {
			p := c.entryPath(id)
			b, _ := os.ReadFile(p)
			return os.WriteFile(p, b[:len(b)/2], 0o644)
		}, "truncated entry"},
		{"entry cut just before its newline", func(c *Cache, id ActionID, out OutputID) error {
			p := c.entryPath(id)
			b, _ := os.ReadFile(p)
			return os.WriteFile(p, b[:len(b)-1], 0o644)
		}, "truncated entry"},
		{"empty entry", func(c *Cache, id ActionID, out OutputID) error {
			return os.WriteFile(c.entryPath(id), nil, 0o644)
		}, "truncated entry"},
		{"garbage entry", func(c *Cache, id ActionID, out OutputID) error {
			return os.WriteFile(c.entryPath(id), []byte("\x00\xff\xfegarbage\n"), 0o644)
		}, "no checksum"},
		{"garbage fields", func(c *Cache, id ActionID, out OutputID) error {
			return os.WriteFile(c.entryPath(id), checked(fmt.Sprintf("v1 %s %s -5 zz", id, out)), 0o644)
		}, "bad entry: size"},
		{"bad output id", func(c *Cache, id ActionID, out OutputID) error {
			return os.WriteFile(c.entryPath(id), checked(fmt.Sprintf("v1 %s %s 66 0", id, "xyz")), 0o644)
		}, "bad entry: output id"},
		{"bad label escape", func(c *Cache, id ActionID, out OutputID) error {
			return os.WriteFile(c.entryPath(id), checked(fmt.Sprintf("v1 %s %s 66 0 model=%%zz", id, out)), 0o644)
		}, "bad entry: label model"},
		{"unknown format version", func(c *Cache, id ActionID, out OutputID) error {
			return os.WriteFile(c.entryPath(id), checked(fmt.Sprintf("v9 %s %s 66 0", id, out)), 0o644)
		}, `entry format "v9"`},
		{"two lines", func(c *Cache, id ActionID, out OutputID) error {
			b, _ := os.ReadFile(c.entryPath(id))
			return os.WriteFile(c.entryPath(id), append(b, b...), 0o644)
		}, "more than one line"},
		{"huge entry", func(c *Cache, id ActionID, out OutputID) error {
			return os.WriteFile(c.entryPath(id), bytes.Repeat([]byte("x"), 100000), 0o644)
		}, "longer than 4096"},
		{"entry of another action", func(c *Cache, id ActionID, out OutputID) error {
			b, _ := os.ReadFile(c.entryPath(other))
			return os.WriteFile(c.entryPath(id), b, 0o644)
		}, "holds the entry of " + other.Short()},
		{"entry pointed at another output", func(c *Cache, id ActionID, out OutputID) error {
			// The other action's output is intact: only the entry's
			// checksum tells that this entry was edited.
			b, _ := os.ReadFile(c.entryPath(id))
			oe, _, err := c.Get(other)
			if err != nil {
				return err
			}
			f := strings.Split(string(b), " ")
			f[2], f[3] = oe.OutputID.String(), fmt.Sprint(oe.Size)
			return os.WriteFile(c.entryPath(id), []byte(strings.Join(f, " ")), 0o644)
		}, "entry does not match its checksum"},
		{"entry without a checksum", func(c *Cache, id ActionID, out OutputID) error {
			b, _ := os.ReadFile(c.entryPath(id))
			line, _, _ := strings.Cut(string(b), " check=")
			return os.WriteFile(c.entryPath(id), []byte(line+"\n"), 0o644)
		}, "entry has no checksum"},
		{"entry is a folder", func(c *Cache, id ActionID, out OutputID) error {
			os.Remove(c.entryPath(id))
			return os.MkdirAll(filepath.Join(c.entryPath(id), "sub"), 0o777)
		}, "unreadable entry"},
	}
	// One cache for all cases (making 256 folders is slow on some disks);
	// each case has its own action and output, and ends repaired.
	c := openTemp(t)
	mustPut(t, c, other, "another output", Label{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := testID("victim " + tc.name)
			content := content[:len(content)-len(tc.name)] + tc.name
			out := mustPut(t, c, id, content, Label{Model: "m"})
			mustHit(t, c, id, content)
			if err := tc.damage(c, id, out); err != nil {
				t.Fatalf("damaging: %v", err)
			}
			_, path, err := c.Get(id)
			me := missOf(t, err)
			if !me.Corrupt || !strings.Contains(me.Reason, tc.reason) || path != "" {
				t.Errorf("Get after damage: %+v (path %q), want a corrupt miss with reason %q", me, path, tc.reason)
			}
			want := fmt.Sprintf("cache: entry for %s was corrupt (%s)", id.Short(), me.Reason)
			if err.Error() != want {
				t.Errorf("message %q, want %q", err, want)
			}
			// List skips or shows the entry, but never fails.
			if _, err := c.List(); err != nil {
				t.Errorf("List: %v", err)
			}
			mustPut(t, c, id, content, Label{Model: "m"})
			mustHit(t, c, id, content)
			mustHit(t, c, other, "another output")
		})
	}
}

func TestTrustSize(t *testing.T) {
	c := openTemp(t)
	c.TrustSize = true
	id := testID("trust")
	out := mustPut(t, c, id, "0123456789", Label{})
	p := c.OutputPath(out)
	os.WriteFile(p, []byte("0123456780"), 0o644)
	// Same size: TrustSize does not look at the bytes, by design.
	if _, _, err := c.Get(id); err != nil {
		t.Errorf("TrustSize Get of a same-size file: %v", err)
	}
	os.WriteFile(p, []byte("012"), 0o644)
	if me := missOf(t, func() error { _, _, err := c.Get(id); return err }()); !me.Corrupt {
		t.Errorf("TrustSize Get of a short file: %+v", me)
	}
	c.TrustSize = false
	os.WriteFile(p, []byte("0123456780"), 0o644)
	if me := missOf(t, func() error { _, _, err := c.Get(id); return err }()); me.Reason != "hash mismatch" {
		t.Errorf("hashing Get of a changed file: %+v", me)
	}
}

func setMtime(t *testing.T, path string, when time.Time) {
	t.Helper()
	if err := os.Chtimes(path, when, when); err != nil {
		t.Fatal(err)
	}
}

func TestGetRefreshesUse(t *testing.T) {
	c := openTemp(t)
	id := testID("used")
	out := mustPut(t, c, id, "x", Label{})
	old := time.Now().Add(-3 * 24 * time.Hour)
	setMtime(t, c.entryPath(id), old)
	setMtime(t, c.OutputPath(out), old)
	e := mustHit(t, c, id, "x")
	if time.Since(e.Used) > time.Minute {
		t.Errorf("Entry.Used = %v, want about now", e.Used)
	}
	for _, p := range []string{c.entryPath(id), c.OutputPath(out)} {
		fi, _ := os.Stat(p)
		if time.Since(fi.ModTime()) > time.Minute {
			t.Errorf("%s: mtime %v not refreshed", filepath.Base(p), fi.ModTime())
		}
	}
	// Within the hour a hit writes nothing.
	recent := time.Now().Add(-10 * time.Minute).Truncate(time.Second)
	setMtime(t, c.entryPath(id), recent)
	mustHit(t, c, id, "x")
	if fi, _ := os.Stat(c.entryPath(id)); !fi.ModTime().Equal(recent) {
		t.Errorf("a hit within the hour changed the mtime to %v", fi.ModTime())
	}
}

func TestListTrimCleanSize(t *testing.T) {
	c := openTemp(t)
	ids := []ActionID{testID("a"), testID("b"), testID("c")}
	outs := make([]OutputID, len(ids))
	for i, id := range ids {
		outs[i] = mustPut(t, c, id, strings.Repeat("x", 100*(i+1)), Label{Model: fmt.Sprintf("m%d", i), Target: "linux/amd64"})
	}
	// Last used: c now, b 2 days ago, a 10 days ago.
	now := time.Now()
	setMtime(t, c.entryPath(ids[1]), now.Add(-48*time.Hour))
	setMtime(t, c.OutputPath(outs[1]), now.Add(-48*time.Hour))
	setMtime(t, c.entryPath(ids[0]), now.Add(-240*time.Hour))
	setMtime(t, c.OutputPath(outs[0]), now.Add(-240*time.Hour))
	// Junk that List must skip.
	os.WriteFile(filepath.Join(c.Dir(), "ab", "notanid-a"), []byte("x\n"), 0o644)
	os.WriteFile(c.entryPath(testID("junk")), []byte("garbage"), 0o644)

	list, err := c.List()
	if err != nil {
		t.Fatal(err)
	}
	var models []string
	for _, e := range list {
		models = append(models, e.Label.Model)
	}
	if strings.Join(models, ",") != "m2,m1,m0" {
		t.Errorf("List order by last use: %v, want m2,m1,m0", models)
	}
	if list[0].Size != 300 || list[0].ActionID != ids[2] || list[0].OutputID != outs[2] {
		t.Errorf("List()[0] = %+v", list[0])
	}

	sizeBefore, err := c.Size()
	if err != nil || sizeBefore < 600 {
		t.Errorf("Size() = %d, %v; want at least 600", sizeBefore, err)
	}

	// A stale temp file (a killed writer) and a fresh one (a Put in flight).
	stale := filepath.Join(c.Dir(), "tmp", "output-stale")
	fresh := filepath.Join(c.Dir(), "tmp", "output-fresh")
	os.WriteFile(stale, []byte("half"), 0o644)
	os.WriteFile(fresh, []byte("half"), 0o644)
	setMtime(t, stale, now.Add(-2*time.Hour))

	oldEntry, err := os.Stat(c.entryPath(ids[0]))
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Trim(DefaultMaxAge)
	if err != nil {
		t.Fatal(err)
	}
	if r.Entries != 1 || r.Files != 3 || r.Bytes != oldEntry.Size()+100+4 {
		t.Errorf("Trim removed %+v, want the 10-day-old entry, its output and the stale temp file", r)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Errorf("stale temp file survived Trim")
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("fresh temp file removed by Trim: %v", err)
	}
	if _, _, err := c.Get(ids[0]); !errors.Is(err, ErrMiss) {
		t.Errorf("trimmed entry still answers: %v", err)
	}
	mustHit(t, c, ids[1], strings.Repeat("x", 200))
	mustHit(t, c, ids[2], strings.Repeat("x", 300))

	// AutoTrim: Trim just ran, so it waits a day.
	if _, done, err := c.AutoTrim(); err != nil || done {
		t.Errorf("AutoTrim right after Trim: done=%v, %v", done, err)
	}
	setMtime(t, c.entryPath(ids[1]), now.Add(-6*24*time.Hour))
	os.WriteFile(filepath.Join(c.Dir(), "trim.txt"), []byte(strconv.FormatInt(now.Add(-25*time.Hour).Unix(), 10)+"\n"), 0o644)
	if r, done, err := c.AutoTrim(); err != nil || !done || r.Entries != 1 {
		t.Errorf("AutoTrim a day later: %+v done=%v, %v; want 1 entry removed", r, done, err)
	}

	r, err = c.Clean()
	if err != nil {
		t.Fatal(err)
	}
	if r.Entries != 2 { // c, and the junk entry of testID("junk")
		t.Errorf("Clean removed %d entries, want 2", r.Entries)
	}
	if list, _ := c.List(); len(list) != 0 {
		t.Errorf("List after Clean: %d entries", len(list))
	}
	if _, err := os.Stat(filepath.Join(c.Dir(), "README")); err != nil {
		t.Errorf("Clean removed the README: %v", err)
	}
	if _, err := os.Stat(filepath.Join(c.Dir(), "00")); err != nil {
		t.Errorf("Clean removed a shard: %v", err)
	}
	if size, _ := c.Size(); size != int64(len(readmeText)) {
		t.Errorf("Size after Clean = %d, want the README's %d", size, len(readmeText))
	}
	// The cache still works.
	mustPut(t, c, ids[0], "again", Label{})
	mustHit(t, c, ids[0], "again")
}

func TestConcurrentGoroutines(t *testing.T) {
	c := openTemp(t)
	const workers, n = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			if err := putWorkload(c, w, n); err != nil {
				errs <- fmt.Errorf("worker %d: %v", w, err)
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	checkWorkload(t, c, workers, n)
}

// checkWorkload asserts that every key of putWorkload answers right.
func checkWorkload(t *testing.T, c *Cache, workers, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		mustHit(t, c, testID(fmt.Sprintf("shared-%d", i)), string(sharedContent(i)))
		for w := 0; w < workers; w++ {
			mustHit(t, c, testID(fmt.Sprintf("own-%d-%d", w, i)), fmt.Sprintf("own %d %d", w, i))
		}
	}
	_, path, err := c.Get(testID("racy"))
	if err != nil {
		t.Fatalf("racy: %v", err)
	}
	got, _ := os.ReadFile(path)
	if p, err := strconv.Atoi(strings.TrimPrefix(string(got), "racy from ")); err != nil || p < 0 || p >= workers {
		t.Errorf("racy holds %q, want one writer's output", got)
	}
	if des, _ := os.ReadDir(filepath.Join(c.Dir(), "tmp")); len(des) != 0 {
		t.Errorf("tmp/ holds %d files after all Puts finished", len(des))
	}
}

func helperCmd(t *testing.T, mode string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{helperEnv + "=" + mode}, env...)...)
	return cmd
}

func TestConcurrentProcesses(t *testing.T) {
	c := openTemp(t)
	const procs, n = 3, 15
	cmds := make([]*exec.Cmd, procs)
	outs := make([]*bytes.Buffer, procs)
	for p := range cmds {
		cmds[p] = helperCmd(t, "put", "HELPER_DIR="+c.Dir(), "HELPER_PROC="+strconv.Itoa(p), "HELPER_N="+strconv.Itoa(n))
		outs[p] = new(bytes.Buffer)
		cmds[p].Stdout, cmds[p].Stderr = outs[p], outs[p]
		if err := cmds[p].Start(); err != nil {
			t.Fatal(err)
		}
	}
	// Read while they write: every answer is a hit with the right bytes
	// or a miss that is not corrupt.
	deadline := time.Now().Add(5 * time.Second)
	for done := false; !done && time.Now().Before(deadline); {
		done = true
		for i := 0; i < n; i++ {
			_, path, err := c.Get(testID(fmt.Sprintf("shared-%d", i)))
			if err != nil {
				if me := missOf(t, err); me.Corrupt {
					t.Fatalf("Get during concurrent Puts: %v", err)
				}
				done = false
				continue
			}
			if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, sharedContent(i)) {
				t.Fatalf("shared-%d during concurrent Puts: %d bytes, %v", i, len(got), err)
			}
		}
	}
	for p, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("process %d: %v\n%s", p, err, outs[p])
		}
	}
	checkWorkload(t, c, procs, n)
}

// TestKillDuringPut kills a process with SIGKILL at each commit point of a
// Put, with and without an older entry for the same action: afterwards the
// cache answers the old entry or a plain miss, never garbage, and a new Put
// works.
func TestKillDuringPut(t *testing.T) {
	for _, stage := range []string{"output", "entry"} {
		for _, withOld := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/old=%v", stage, withOld), func(t *testing.T) {
				c := openTemp(t)
				id := testID("victim")
				if withOld {
					mustPut(t, c, id, oldContent, Label{Model: "victim"})
				}
				cmd := helperCmd(t, "put-block", "HELPER_DIR="+c.Dir(), "HELPER_STAGE="+stage)
				stdout, err := cmd.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				ready := make(chan string, 1)
				go func() {
					line, _ := bufio.NewReader(stdout).ReadString('\n')
					ready <- line
				}()
				select {
				case line := <-ready:
					if line != "ready\n" {
						cmd.Process.Kill()
						cmd.Wait()
						t.Fatalf("helper said %q; stderr:\n%s", line, stderr.String())
					}
				case <-time.After(10 * time.Second):
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatalf("helper never reached stage %s; stderr:\n%s", stage, stderr.String())
				}
				if err := cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
				cmd.Wait()

				_, path, err := c.Get(id)
				if withOld {
					if err != nil {
						t.Fatalf("after kill: %v, want the old entry", err)
					}
					if got, _ := os.ReadFile(path); string(got) != oldContent {
						t.Fatalf("after kill: %q, want the old entry %q", got, oldContent)
					}
				} else if me := missOf(t, err); me.Corrupt {
					t.Fatalf("after kill: %v, want a plain miss", err)
				}
				// The killed writer left a temp file; Trim removes it
				// once it is stale.
				tmps, _ := filepath.Glob(filepath.Join(c.Dir(), "tmp", "*"))
				if len(tmps) != 1 {
					t.Errorf("tmp/ holds %v, want the killed writer's one file", tmps)
				}
				for _, p := range tmps {
					setMtime(t, p, time.Now().Add(-2*time.Hour))
				}
				if r, err := c.Trim(DefaultMaxAge); err != nil || r.Files != len(tmps) {
					t.Errorf("Trim after kill: %+v, %v", r, err)
				}
				mustPut(t, c, id, newContent, Label{})
				mustHit(t, c, id, newContent)
			})
		}
	}
}

// TestCacheRemovedWhileOpen: someone runs rm -rf on the cache (or a shard)
// while mlbuild has it open; Get misses and Put rebuilds the folders.
func TestCacheRemovedWhileOpen(t *testing.T) {
	c := openTemp(t)
	id := testID("removed")
	out := mustPut(t, c, id, "x", Label{})
	if err := os.RemoveAll(filepath.Dir(c.OutputPath(out))); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Dir(c.entryPath(id))); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Get(id); !errors.Is(err, ErrMiss) {
		t.Errorf("Get after its shard was removed: %v", err)
	}
	mustPut(t, c, id, "x", Label{})
	mustHit(t, c, id, "x")

	if err := os.RemoveAll(c.Dir()); err != nil {
		t.Fatal(err)
	}
	if me := missOf(t, func() error { _, _, err := c.Get(id); return err }()); me.Corrupt {
		t.Errorf("Get after the cache was removed: %+v, want a plain miss", me)
	}
	mustPut(t, c, id, "y", Label{})
	mustHit(t, c, id, "y")
	r, err := c.GetOrBuild(NewKey(), Label{}, new(bytes.Buffer), func(p string) error { return os.WriteFile(p, []byte("z"), 0o644) })
	if err != nil || r.Hit {
		t.Errorf("GetOrBuild in a re-created cache: %+v, %v", r, err)
	}
}
