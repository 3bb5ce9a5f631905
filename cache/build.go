package cache

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// EnvDebug names the environment variable holding mlbuild's debug switches,
// a comma-separated list. The cache reads two of them:
//
//	cachekey     GetOrBuild prints the action ID and its key lines, so two
//	             runs' outputs can be diffed to find the input that changed
//	cacheverify  GetOrBuild rebuilds even on a hit and fails if the new
//	             output differs from the cached one (a reproducibility check)
const EnvDebug = "MLBUILD_DEBUG"

// DebugEnabled says whether switch name is listed in $MLBUILD_DEBUG.
func DebugEnabled(name string) bool {
	for _, s := range strings.Split(os.Getenv(EnvDebug), ",") {
		if strings.TrimSpace(s) == name {
			return true
		}
	}
	return false
}

// Result is what GetOrBuild found or made.
type Result struct {
	Entry Entry
	Path  string // the output in the cache; read or copy it, never change it
	Hit   bool   // true when no build ran (or, under cacheverify, was needed)
	// Uncached is true when the output could not be stored (a read-only
	// cache): Path is then a temporary file, which Close removes.
	Uncached bool
}

// Close removes the output of an uncached Result; it does nothing for an
// output in the cache.
func (r Result) Close() error {
	if !r.Uncached || r.Path == "" {
		return nil
	}
	return os.Remove(r.Path)
}

// BuildUncached runs build on a fresh temporary file outside any cache,
// for when the cache cannot be opened. The caller reads the output at the
// Result's Path and then calls Close.
func BuildUncached(build func(outPath string) error) (Result, error) {
	f, err := os.CreateTemp("", "mlbuild-uncached-*")
	if err != nil {
		return Result{}, fmt.Errorf("building without the cache: %v", err)
	}
	name := f.Name()
	f.Close()
	if err := build(name); err != nil {
		os.Remove(name)
		return Result{}, err
	}
	return Result{Path: name, Uncached: true}, nil
}

// GetOrBuild returns the output of the action that key describes: from the
// cache when a valid entry exists, otherwise by calling build with the path
// of a fresh temporary file (inside the cache directory) that build must
// fill, and storing the result under key with label. A damaged entry is
// noted on notes ("cache: entry for ... was corrupt (...); rebuilding") and
// rebuilt. build's error is returned unchanged, so its exit code survives.
// After a build, entries unused for DefaultMaxAge are trimmed (AutoTrim, at
// most daily). See EnvDebug for the cachekey and cacheverify switches.
func (c *Cache) GetOrBuild(key *Key, label Label, notes io.Writer, build func(outPath string) error) (Result, error) {
	id := key.ID()
	if DebugEnabled("cachekey") {
		fmt.Fprintf(notes, "cache: action %s from key lines:\n", id)
		for _, line := range strings.SplitAfter(key.Explain(), "\n") {
			if line != "" {
				fmt.Fprintf(notes, "\t%s", line)
			}
		}
	}
	e, path, err := c.Get(id)
	if err == nil {
		if DebugEnabled("cacheverify") {
			if err := c.verifyRebuild(e, build); err != nil {
				return Result{}, err
			}
		}
		return Result{Entry: e, Path: path, Hit: true}, nil
	}
	if me := (*MissError)(nil); errors.As(err, &me) && me.Corrupt {
		fmt.Fprintf(notes, "%v; rebuilding\n", err)
	} else if DebugEnabled("cachekey") {
		fmt.Fprintf(notes, "cache: no entry for %s; building\n", id.Short())
	}
	// A cache that cannot be written (read-only, full) costs the caching,
	// not the build: one note, and the output comes from outside it.
	f, err := c.createTemp("build-*")
	if err != nil {
		fmt.Fprintf(notes, "%v; building without caching\n", err)
		return BuildUncached(build)
	}
	tmp := f.Name()
	f.Close()
	kept := false
	defer func() {
		if !kept {
			os.Remove(tmp)
		}
	}()
	if err := build(tmp); err != nil {
		return Result{}, err
	}
	out, size, err := c.PutFile(id, tmp, label)
	if err != nil {
		fmt.Fprintf(notes, "%v; the program is built but not cached\n", err)
		kept = true
		return Result{Path: tmp, Uncached: true}, nil
	}
	c.AutoTrim() // best effort: a full disk shows up at the next Put
	e, path, err = c.Get(id)
	if err != nil {
		// Another process replaced or trimmed the entry in between; our
		// own output is still in place unless trimmed too.
		path = c.OutputPath(out)
		e = Entry{ActionID: id, OutputID: out, Size: size, Label: label}
	}
	return Result{Entry: e, Path: path}, nil
}

// buildToTemp reserves a temporary file in the cache's tmp/ folder and runs
// build on it. The file's name is returned even on error, for removal.
func (c *Cache) buildToTemp(build func(outPath string) error) (string, error) {
	f, err := c.createTemp("build-*")
	if err != nil {
		return "", err
	}
	name := f.Name()
	f.Close()
	return name, build(name)
}

// verifyRebuild builds e's action again and compares the output's hash with
// the cached one.
func (c *Cache) verifyRebuild(e Entry, build func(outPath string) error) error {
	tmp, err := c.buildToTemp(build)
	if tmp != "" {
		defer os.Remove(tmp)
	}
	if err != nil {
		return err
	}
	got, size, err := HashFile(tmp)
	if err != nil {
		return fmt.Errorf("cache verify: %v", err)
	}
	if got != e.OutputID || size != e.Size {
		return fmt.Errorf("cache verify: rebuilding action %s gave output %s (%d bytes), but the cache holds %s (%d bytes): the build is not reproducible, or its key misses an input",
			e.ActionID.Short(), got.Short(), size, e.OutputID.Short(), e.Size)
	}
	return nil
}
