// Package cache is mlbuild's content-addressed build cache, Go's build cache
// in small. A compile computes an ActionID from readable "name value" lines
// (Key) that cover everything that changes the generated program, and asks
// Get for it; on a miss it builds and Puts the binary. Outputs are stored
// under the SHA-256 of their bytes (OutputID) and checked against it on every
// Get, so a damaged entry is a miss with a reason, never a crash and never a
// wrong binary. Every file is written to a temporary name and renamed into
// place, so two mlbuild processes may use one cache at once and a process
// killed mid-write leaves either the old entry or none.
//
// Layout of a cache directory (also written to its README):
//
//	README            what the folder is
//	trim.txt          when AutoTrim last ran
//	tmp/              files being written (stale ones are trimmed)
//	xx/<actionid>-a   an entry: one text line, see Entry
//	xx/<outputid>-d   an output's bytes
//
// where xx is the first two hex digits of the ID. An entry's modification
// time is when it was last used; Trim removes what was not used for a while.
package cache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// File names and limits of the on-disk format.
const (
	entrySuffix   = "-a"
	outputSuffix  = "-d"
	tmpDirName    = "tmp"
	readmeName    = "README"
	trimStampName = "trim.txt"
	entryVersion  = "v1"
	// maxEntryBytes bounds what Get reads of an entry file, so a huge or
	// garbage file cannot make it allocate much.
	maxEntryBytes = 4096
	// maxLabelValue bounds each label value (in bytes, before escaping) so
	// an entry always fits in maxEntryBytes.
	maxLabelValue = 128
)

// DefaultMaxAge is how long an entry may go unused before Trim (as called by
// AutoTrim and `mlbuild cache trim`) removes it: five days, like the Go build
// cache, long enough to survive a weekend.
const DefaultMaxAge = 5 * 24 * time.Hour

// touchInterval is how stale an entry's modification time may get before Get
// refreshes it. Refreshing at most hourly keeps a hit from writing to disk
// every time, at no cost to trimming, which counts in days.
const touchInterval = time.Hour

// staleTempAge is when a file in tmp/ is considered abandoned (its writer
// was killed). No Put takes this long, so removing it cannot break one.
const staleTempAge = time.Hour

// autoTrimInterval is how often AutoTrim actually trims.
const autoTrimInterval = 24 * time.Hour

// EnvDir names the environment variable that overrides DefaultDir.
const EnvDir = "MLBUILD_CACHE_DIR"

// TestHookPut, when not nil, is called by Put at its two commit points, with
// stage "output" after the output's bytes are written and synced to a
// temporary file but before it is renamed into place, and with stage "entry"
// after the entry line is written to a temporary file but before that is
// renamed. Tests use it to kill a process in the middle of a Put; nothing
// else should set it.
var TestHookPut func(stage string)

// ErrMiss is reported (wrapped in a *MissError) when Get has no usable entry.
var ErrMiss = errors.New("cache miss")

// MissError says why Get found no usable entry. errors.Is(err, ErrMiss) holds
// for it. Corrupt is false when there simply was no entry, and true when an
// entry existed but was damaged; a caller notes the latter on stderr and
// rebuilds, and the rebuild's Put repairs the entry.
type MissError struct {
	ID      ActionID
	Reason  string // e.g. "hash mismatch", "output file missing"
	Corrupt bool
}

func (e *MissError) Error() string {
	if !e.Corrupt {
		return fmt.Sprintf("cache: no entry for %s", e.ID.Short())
	}
	return fmt.Sprintf("cache: entry for %s was corrupt (%s)", e.ID.Short(), e.Reason)
}

// Is makes errors.Is(err, ErrMiss) true.
func (e *MissError) Is(target error) bool { return target == ErrMiss }

// Label describes what an entry holds, for people reading `mlbuild cache ls`.
// It is stored with the entry and plays no part in lookups. Values longer
// than 128 bytes are cut.
type Label struct {
	Model     string // the model's name in its spec
	Backend   string // e.g. "cpu", "metal"
	Target    string // GOOS/GOARCH, e.g. "linux/amd64"
	Version   string // the mlbuild version that built it
	GoVersion string // the Go toolchain that built it
	Source    string // the spec file that was compiled
}

// Entry is one cache entry as stored in its action file, plus when it was
// last used.
type Entry struct {
	ActionID ActionID
	OutputID OutputID
	Size     int64     // bytes of the output
	Time     time.Time // when it was put
	Used     time.Time // when it was last used (refreshed at most hourly)
	Label    Label
}

// Cache is a cache directory opened by Open. Its methods are safe for use by
// many goroutines and many processes at once.
type Cache struct {
	dir string

	// TrustSize makes Get check only an output's size against its entry,
	// not its SHA-256. The default (false) hashes the output on every Get,
	// which costs milliseconds for the few-megabyte binaries mlbuild builds
	// and catches a flipped byte; set it only for outputs so large that
	// hashing them is noticeable.
	TrustSize bool
}

// DefaultDir is the cache directory mlbuild uses when none is given:
// $MLBUILD_CACHE_DIR if set, else "mlbuild" in the user's cache directory
// (os.UserCacheDir: ~/.cache on Linux, ~/Library/Caches on macOS).
func DefaultDir() (string, error) {
	if d := os.Getenv(EnvDir); d != "" {
		return d, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("cache: no user cache directory (%v); set %s", err, EnvDir)
	}
	return filepath.Join(base, "mlbuild"), nil
}

// Open opens the cache in dir, creating it, its README, tmp/ and the shard
// folders 00 to ff as needed. A relative dir is made absolute, so Dir and the
// paths Get returns stay valid after a change of working directory.
func Open(dir string) (*Cache, error) {
	if dir == "" {
		return nil, errors.New("cache: empty directory name")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("cache: %v", err)
	}
	if err := os.MkdirAll(abs, 0o777); err != nil {
		return nil, fmt.Errorf("cache: creating %s: %v", abs, err)
	}
	for i := 0; i < 256; i++ {
		if err := mkdirIfMissing(filepath.Join(abs, fmt.Sprintf("%02x", i))); err != nil {
			return nil, err
		}
	}
	if err := mkdirIfMissing(filepath.Join(abs, tmpDirName)); err != nil {
		return nil, err
	}
	c := &Cache{dir: abs}
	readme := filepath.Join(abs, readmeName)
	if old, err := os.ReadFile(readme); err != nil || string(old) != readmeText {
		// Best effort: a read-only cache still serves its entries.
		c.writeFileAtomic(readme, []byte(readmeText), "")
	}
	return c, nil
}

func mkdirIfMissing(dir string) error {
	err := os.Mkdir(dir, 0o777)
	if err == nil || errors.Is(err, fs.ErrExist) {
		if fi, serr := os.Stat(dir); serr != nil || !fi.IsDir() {
			return fmt.Errorf("cache: %s exists and is not a directory", dir)
		}
		return nil
	}
	return fmt.Errorf("cache: creating %s: %v", dir, err)
}

// readmeText is written to every cache directory so that someone who finds
// it knows what it is and that deleting it is safe.
const readmeText = `This directory holds mlbuild's build cache: compiled model binaries, keyed
by a hash of everything that went into them (the canonical plan, the mlbuild
and Go versions, the backend and the target). When the same model is compiled
again, mlbuild copies the binary from here instead of building it.

It is safe to delete this whole directory at any time, or to run
'mlbuild cache clean'. Entries unused for 5 days are removed by
'mlbuild cache trim', which mlbuild also runs by itself at most once a day.
'mlbuild cache ls' lists the entries; MLBUILD_CACHE_DIR moves the cache.

Layout: xx/<action id>-a is an entry, one text line (format version, action
id, output id, size, time written, labels); xx/<output id>-d holds an
output's bytes, named by their SHA-256; xx is the first two hex digits of the
name. An entry's modification time is when it was last used. tmp/ holds
files being written.
`

// Dir is the cache's absolute directory.
func (c *Cache) Dir() string { return c.dir }

func (c *Cache) entryPath(id ActionID) string {
	s := id.String()
	return filepath.Join(c.dir, s[:2], s+entrySuffix)
}

// OutputPath is where the bytes of output id live (whether or not they do).
func (c *Cache) OutputPath(id OutputID) string {
	s := id.String()
	return filepath.Join(c.dir, s[:2], s+outputSuffix)
}

// createTemp makes a temporary file in tmp/, re-creating tmp/ (and the cache
// folder) if someone removed them while the cache was open.
func (c *Cache) createTemp(pattern string) (*os.File, error) {
	dir := filepath.Join(c.dir, tmpDirName)
	f, err := os.CreateTemp(dir, pattern)
	if errors.Is(err, fs.ErrNotExist) {
		if merr := os.MkdirAll(dir, 0o777); merr == nil {
			f, err = os.CreateTemp(dir, pattern)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("cache: %v", err)
	}
	return f, nil
}

// Put stores the bytes read from r as the output of action id, with label
// for `mlbuild cache ls`, replacing any earlier entry for id. It returns the
// output's ID and size. The bytes are written to a temporary file, synced,
// and renamed into place before the entry that points at them is written
// (again through a temporary file and a rename), so a reader or a crash at
// any moment sees the old entry, the new one, or none.
func (c *Cache) Put(id ActionID, r io.Reader, label Label) (OutputID, int64, error) {
	tmp, err := c.createTemp("output-*")
	if err != nil {
		return OutputID{}, 0, err
	}
	tmpName := tmp.Name()
	committed := false
	defer func() {
		if !committed {
			tmp.Close()
			os.Remove(tmpName)
		}
	}()
	h := sha256.New()
	size, err := io.Copy(io.MultiWriter(tmp, h), r)
	if err != nil {
		return OutputID{}, 0, fmt.Errorf("cache: writing output of %s: %v", id.Short(), err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return OutputID{}, 0, fmt.Errorf("cache: %v", err)
	}
	if err := tmp.Sync(); err != nil {
		return OutputID{}, 0, fmt.Errorf("cache: syncing %s: %v", tmpName, err)
	}
	if err := tmp.Close(); err != nil {
		return OutputID{}, 0, fmt.Errorf("cache: %v", err)
	}
	var out OutputID
	h.Sum(out[:0])
	if TestHookPut != nil {
		TestHookPut("output")
	}
	outPath := c.OutputPath(out)
	if err := renameReplacing(tmpName, outPath); err != nil {
		// Some systems refuse to replace a file another process has open.
		// That is fine if the file already holds exactly these bytes.
		if got, n, herr := HashFile(outPath); herr != nil || got != out || n != size {
			return OutputID{}, 0, fmt.Errorf("cache: storing output of %s: %v", id.Short(), err)
		}
		os.Remove(tmpName)
	}
	committed = true

	e := Entry{ActionID: id, OutputID: out, Size: size, Time: time.Now(), Label: label}
	if err := c.writeFileAtomic(c.entryPath(id), formatEntry(e), "entry"); err != nil {
		return OutputID{}, 0, err
	}
	return out, size, nil
}

// PutFile is Put reading the output from the file at path.
func (c *Cache) PutFile(id ActionID, path string, label Label) (OutputID, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return OutputID{}, 0, fmt.Errorf("cache: %v", err)
	}
	defer f.Close()
	return c.Put(id, f, label)
}

// writeFileAtomic writes data to a synced temporary file and renames it to
// name. hookStage, if not empty, is passed to TestHookPut before the rename.
func (c *Cache) writeFileAtomic(name string, data []byte, hookStage string) error {
	tmp, err := c.createTemp("write-*")
	if err != nil {
		return err
	}
	tmpName := tmp.Name()
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmpName)
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("cache: writing %s: %v", name, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("cache: %v", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("cache: syncing %s: %v", name, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("cache: %v", err)
	}
	if hookStage != "" && TestHookPut != nil {
		TestHookPut(hookStage)
	}
	if err := renameReplacing(tmpName, name); err != nil {
		return fmt.Errorf("cache: writing %s: %v", name, err)
	}
	ok = true
	return nil
}

// renameReplacing renames tmp to name. If name is in the way as something
// other than a regular file (a folder made by hand, say), it is removed and
// the rename tried once more, so that a Put repairs such damage too; so is
// a missing shard folder.
func renameReplacing(tmp, name string) error {
	err := os.Rename(tmp, name)
	if err == nil {
		return nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		// The shard folder was removed while the cache was open.
		if _, serr := os.Stat(tmp); serr == nil && os.MkdirAll(filepath.Dir(name), 0o777) == nil {
			return os.Rename(tmp, name)
		}
	}
	if fi, serr := os.Lstat(name); serr == nil && !fi.Mode().IsRegular() {
		if rerr := os.RemoveAll(name); rerr == nil {
			return os.Rename(tmp, name)
		}
	}
	return err
}

// Get finds the entry for id and returns it with the path of its output,
// which the caller may read or copy but must not change. Any problem with
// the entry (none, unreadable, truncated, garbage, output missing or of the
// wrong size or hash) is a *MissError, whose Reason says which; Get never
// returns a path to bytes that differ from what was put. A hit refreshes the
// entry's modification time (at most hourly) so that Trim keeps it.
func (c *Cache) Get(id ActionID) (Entry, string, error) {
	miss := func(corrupt bool, format string, args ...any) (Entry, string, error) {
		return Entry{}, "", &MissError{ID: id, Reason: fmt.Sprintf(format, args...), Corrupt: corrupt}
	}
	entryPath := c.entryPath(id)
	data, fi, err := readEntryFile(entryPath)
	if errors.Is(err, fs.ErrNotExist) {
		return miss(false, "not found")
	}
	if err != nil {
		return miss(true, "unreadable entry: %v", err)
	}
	e, err := parseEntry(data)
	if err != nil {
		return miss(true, "%v", err)
	}
	if e.ActionID != id {
		return miss(true, "entry file holds the entry of %s", e.ActionID.Short())
	}
	e.Used = fi.ModTime()
	outPath := c.OutputPath(e.OutputID)
	ofi, err := os.Stat(outPath)
	if errors.Is(err, fs.ErrNotExist) {
		return miss(true, "output file missing")
	}
	if err != nil {
		return miss(true, "output unreadable: %v", err)
	}
	if !ofi.Mode().IsRegular() {
		return miss(true, "output is not a regular file")
	}
	if ofi.Size() != e.Size {
		return miss(true, "output has %d bytes, entry says %d", ofi.Size(), e.Size)
	}
	if !c.TrustSize {
		got, n, err := HashFile(outPath)
		if err != nil {
			return miss(true, "output unreadable: %v", err)
		}
		if n != e.Size {
			return miss(true, "output has %d bytes, entry says %d", n, e.Size)
		}
		if got != e.OutputID {
			return miss(true, "hash mismatch")
		}
	}
	if now := time.Now(); now.Sub(e.Used) > touchInterval {
		// Best effort: a read-only cache still answers, it just trims
		// entries by their last write instead of their last use.
		if os.Chtimes(entryPath, now, now) == nil {
			e.Used = now
		}
		os.Chtimes(outPath, now, now)
	}
	return e, outPath, nil
}

// readEntryFile reads at most maxEntryBytes+1 bytes of an entry file, which
// is enough to tell an over-long one.
func readEntryFile(path string) ([]byte, fs.FileInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, errors.New("not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, maxEntryBytes+1))
	if err != nil {
		return nil, nil, err
	}
	return data, fi, nil
}

// HashFile returns the SHA-256 and the size of the file at path, the
// OutputID it would have in the cache. A verifying compile uses it to
// compare a fresh build with a cached one.
func HashFile(path string) (OutputID, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return OutputID{}, 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return OutputID{}, 0, fmt.Errorf("reading %s: %v", path, err)
	}
	var id OutputID
	h.Sum(id[:0])
	return id, n, nil
}

// labelKeys are the label fields in the order an entry line writes them.
var labelKeys = []string{"model", "backend", "target", "version", "go", "source"}

func labelFields(l *Label) []*string {
	return []*string{&l.Model, &l.Backend, &l.Target, &l.Version, &l.GoVersion, &l.Source}
}

// formatEntry writes an entry as its one line:
//
//	v1 <action id> <output id> <size> <unix nanoseconds> model=... backend=... target=... version=... go=... source=... check=<hex>
//
// Label values are URL-query-escaped, so they hold no spaces or newlines.
// check is entryCheck of the line before it, so that an entry edited by
// hand (pointed at another action's output, say) is a corrupt miss rather
// than a hit serving the wrong program; an mlbuild that predates it skips
// it as an unknown label. The line ends in a newline, whose absence marks
// a truncated file.
func formatEntry(e Entry) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s %s %d %d", entryVersion, e.ActionID, e.OutputID, e.Size, e.Time.UnixNano())
	for i, v := range labelFields(&e.Label) {
		fmt.Fprintf(&b, " %s=%s", labelKeys[i], url.QueryEscape(cutLabel(*v)))
	}
	fmt.Fprintf(&b, " %s%s\n", checkPrefix, entryCheck(b.Bytes()))
	return b.Bytes()
}

// checkPrefix starts an entry line's last field, its checksum.
const checkPrefix = "check="

// entryCheck is the checksum of an entry line (without its check field):
// the first 16 bytes of its SHA-256, in hex. It finds edits and damage; it
// is no defence against someone who can write the cache and recompute it,
// who could as well put an entry of their own.
func entryCheck(line []byte) string {
	h := sha256.New()
	h.Write([]byte("mlbuild cache entry\n"))
	h.Write(line)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// cutLabel shortens a label value to maxLabelValue bytes without splitting a
// UTF-8 sequence.
func cutLabel(s string) string {
	if len(s) <= maxLabelValue {
		return s
	}
	s = s[:maxLabelValue]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// parseEntry reads an entry line; its error is a reason for a MissError.
// Unknown label keys are skipped so that a later format may add some.
func parseEntry(data []byte) (Entry, error) {
	if len(data) > maxEntryBytes {
		return Entry{}, fmt.Errorf("entry longer than %d bytes", maxEntryBytes)
	}
	line, ok := bytes.CutSuffix(data, []byte("\n"))
	if !ok {
		return Entry{}, errors.New("truncated entry (no final newline)")
	}
	if bytes.IndexByte(line, '\n') >= 0 {
		return Entry{}, errors.New("entry has more than one line")
	}
	body, check, ok := bytes.Cut(line, []byte(" "+checkPrefix))
	if !ok {
		return Entry{}, errors.New("entry has no checksum (edited, or written by an older mlbuild)")
	}
	f := strings.Split(string(body), " ")
	if len(f) < 5 {
		return Entry{}, fmt.Errorf("entry has %d fields, want at least 5", len(f))
	}
	if f[0] != entryVersion {
		return Entry{}, fmt.Errorf("entry format %q, want %q", cutLabel(f[0]), entryVersion)
	}
	var e Entry
	var err error
	if e.ActionID, err = ParseActionID(f[1]); err != nil {
		return Entry{}, fmt.Errorf("bad entry: %v", err)
	}
	if e.OutputID, err = ParseOutputID(f[2]); err != nil {
		return Entry{}, fmt.Errorf("bad entry: %v", err)
	}
	if e.Size, err = strconv.ParseInt(f[3], 10, 64); err != nil || e.Size < 0 {
		return Entry{}, fmt.Errorf("bad entry: size %q", cutLabel(f[3]))
	}
	ns, err := strconv.ParseInt(f[4], 10, 64)
	if err != nil {
		return Entry{}, fmt.Errorf("bad entry: time %q", cutLabel(f[4]))
	}
	e.Time = time.Unix(0, ns)
	fields := labelFields(&e.Label)
	for _, kv := range f[5:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return Entry{}, fmt.Errorf("bad entry: label %q", cutLabel(kv))
		}
		v, err := url.QueryUnescape(v)
		if err != nil {
			return Entry{}, fmt.Errorf("bad entry: label %s: %v", k, err)
		}
		for i, name := range labelKeys {
			if k == name {
				*fields[i] = v
			}
		}
	}
	if string(check) != entryCheck(body) {
		return Entry{}, errors.New("entry does not match its checksum (edited by hand?)")
	}
	return e, nil
}

// List returns the entries of the cache, most recently used first, without
// checking their outputs (Get does that). Entry files that cannot be parsed
// are left out.
func (c *Cache) List() ([]Entry, error) {
	var list []Entry
	for i := 0; i < 256; i++ {
		shard := filepath.Join(c.dir, fmt.Sprintf("%02x", i))
		des, err := os.ReadDir(shard)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return nil, fmt.Errorf("cache: %v", err)
		}
		for _, de := range des {
			name := de.Name()
			idHex, ok := strings.CutSuffix(name, entrySuffix)
			if !ok {
				continue
			}
			id, err := ParseActionID(idHex)
			if err != nil {
				continue
			}
			data, fi, err := readEntryFile(filepath.Join(shard, name))
			if err != nil {
				continue
			}
			e, err := parseEntry(data)
			if err != nil || e.ActionID != id {
				continue
			}
			e.Used = fi.ModTime()
			list = append(list, e)
		}
	}
	sort.Slice(list, func(i, j int) bool {
		if !list[i].Used.Equal(list[j].Used) {
			return list[i].Used.After(list[j].Used)
		}
		return bytes.Compare(list[i].ActionID[:], list[j].ActionID[:]) < 0
	})
	return list, nil
}

// Removed counts what Clean or Trim deleted.
type Removed struct {
	Entries int   // entry files
	Files   int   // all files, entries included
	Bytes   int64 // their total size
}

// Clean removes every entry, output and temporary file, keeping the README
// and the empty folders. A Put running at the same time may fail; a Get
// misses.
func (c *Cache) Clean() (Removed, error) {
	return c.remove(func(string, fs.FileInfo) bool { return true }, true)
}

// Trim removes the entries and outputs not used for maxAge (DefaultMaxAge is
// the documented rule: five days), and temporary files left for an hour by
// writers that were killed. Entries refresh their time on use at most
// hourly, so maxAge below an hour may remove entries in use.
func (c *Cache) Trim(maxAge time.Duration) (Removed, error) {
	now := time.Now()
	cutoff := now.Add(-maxAge)
	tmpCutoff := now.Add(-staleTempAge)
	r, err := c.remove(func(path string, fi fs.FileInfo) bool {
		if filepath.Base(filepath.Dir(path)) == tmpDirName {
			return fi.ModTime().Before(tmpCutoff)
		}
		return fi.ModTime().Before(cutoff)
	}, false)
	if err != nil {
		return r, err
	}
	stamp := []byte(strconv.FormatInt(now.Unix(), 10) + "\n")
	if err := c.writeFileAtomic(filepath.Join(c.dir, trimStampName), stamp, ""); err != nil {
		return r, err
	}
	return r, nil
}

// AutoTrim runs Trim(DefaultMaxAge) if it last ran more than a day ago (as
// recorded in trim.txt), so that a command can call it after every use of
// the cache at the cost of one small read. done says whether it trimmed.
func (c *Cache) AutoTrim() (r Removed, done bool, err error) {
	if data, err := os.ReadFile(filepath.Join(c.dir, trimStampName)); err == nil {
		if t, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64); err == nil {
			if time.Since(time.Unix(t, 0)) < autoTrimInterval {
				return Removed{}, false, nil
			}
		}
	}
	r, err = c.Trim(DefaultMaxAge)
	return r, err == nil, err
}

// remove deletes the files of the shards and tmp/ for which drop holds, and
// trim.txt too when all is set.
func (c *Cache) remove(drop func(path string, fi fs.FileInfo) bool, all bool) (Removed, error) {
	var r Removed
	var firstErr error
	dirs := []string{tmpDirName}
	for i := 0; i < 256; i++ {
		dirs = append(dirs, fmt.Sprintf("%02x", i))
	}
	for _, d := range dirs {
		dir := filepath.Join(c.dir, d)
		des, err := os.ReadDir(dir)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) && firstErr == nil {
				firstErr = fmt.Errorf("cache: %v", err)
			}
			continue
		}
		for _, de := range des {
			path := filepath.Join(dir, de.Name())
			fi, err := de.Info()
			if err != nil || !fi.Mode().IsRegular() || !drop(path, fi) {
				continue
			}
			if err := os.Remove(path); err != nil {
				if !errors.Is(err, fs.ErrNotExist) && firstErr == nil {
					firstErr = fmt.Errorf("cache: %v", err)
				}
				continue
			}
			r.Files++
			r.Bytes += fi.Size()
			if d != tmpDirName && isEntryName(de.Name()) {
				r.Entries++
			}
		}
	}
	if all {
		if err := os.Remove(filepath.Join(c.dir, trimStampName)); err != nil && !errors.Is(err, fs.ErrNotExist) && firstErr == nil {
			firstErr = fmt.Errorf("cache: %v", err)
		}
	}
	return r, firstErr
}

// isEntryName says whether a file name is that of an entry: an action ID in
// hex and the entry suffix.
func isEntryName(name string) bool {
	idHex, ok := strings.CutSuffix(name, entrySuffix)
	if !ok {
		return false
	}
	_, err := ParseActionID(idHex)
	return err == nil
}

// Size is the total size in bytes of the cache's files, README included.
func (c *Cache) Size() (int64, error) {
	var total int64
	err := filepath.WalkDir(c.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while we walked
			}
			return err
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				total += fi.Size()
			}
		}
		return nil
	})
	if err != nil {
		return total, fmt.Errorf("cache: %v", err)
	}
	return total, nil
}
