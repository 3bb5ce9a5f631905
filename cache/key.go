package cache

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"unicode"
)

// ActionID names one build action: the hash of every input that changes its
// output (see Key). Two compiles with the same ActionID must produce the same
// bytes, so the second one can reuse the first one's output.
type ActionID [32]byte

// OutputID is the SHA-256 of an output's bytes. Entries store it so that Get
// can prove the file on disk is the one that was put.
type OutputID [32]byte

// String is the lowercase hex form used in file names and messages.
func (id ActionID) String() string { return hex.EncodeToString(id[:]) }

// String is the lowercase hex form used in file names and messages.
func (id OutputID) String() string { return hex.EncodeToString(id[:]) }

// Short is the first 12 hex digits, enough to tell entries apart in a table
// or a message.
func (id ActionID) Short() string { return id.String()[:12] }

// Short is the first 12 hex digits, enough to tell outputs apart in a table
// or a message.
func (id OutputID) Short() string { return id.String()[:12] }

// ParseActionID reads the 64-digit hex form written by ActionID.String.
func ParseActionID(s string) (ActionID, error) {
	var id ActionID
	if err := parseHex32(s, id[:]); err != nil {
		return ActionID{}, fmt.Errorf("action id %q: %v", s, err)
	}
	return id, nil
}

// ParseOutputID reads the 64-digit hex form written by OutputID.String.
func ParseOutputID(s string) (OutputID, error) {
	var id OutputID
	if err := parseHex32(s, id[:]); err != nil {
		return OutputID{}, fmt.Errorf("output id %q: %v", s, err)
	}
	return id, nil
}

func parseHex32(s string, dst []byte) error {
	if len(s) != 64 {
		return fmt.Errorf("want 64 hex digits, have %d characters", len(s))
	}
	if strings.ToLower(s) != s {
		return fmt.Errorf("hex digits must be lowercase")
	}
	if _, err := hex.Decode(dst, []byte(s)); err != nil {
		return err
	}
	return nil
}

// keyHeader is hashed before a Key's lines. Changing it invalidates every
// entry ever written, which is the right thing to do when the meaning of the
// lines changes.
const keyHeader = "mlbuild cache key v1\n"

// maxInlineValue is the longest value written into a key line as it is;
// longer values (a canonical plan, a source file) appear as their SHA-256 so
// that Explain stays readable.
const maxInlineValue = 80

// Key builds an ActionID from readable "name value" lines, in the spirit of
// the Go build cache's action IDs: the lines are what is hashed, so printing
// them (Explain, with MLBUILD_DEBUG=cachekey) shows exactly why two builds got
// different IDs. The order of Add calls matters; callers add inputs in a
// fixed order.
type Key struct {
	lines strings.Builder
}

// NewKey starts an empty key.
func NewKey() *Key { return &Key{} }

// Add appends the line "name value". A value that is long, multi-line, not
// printable, or that itself starts with "sha256:" is written as
// "name sha256:<hex of value>" instead, so the line stays short and no short
// value can be mistaken for a hashed one. A name that is empty or holds
// spaces or control characters is written Go-quoted, so every line still
// splits at its first space.
func (k *Key) Add(name, value string) {
	if inlineValue(value) {
		k.addLine(name, value)
		return
	}
	sum := sha256.Sum256([]byte(value))
	k.addLine(name, "sha256:"+hex.EncodeToString(sum[:]))
}

// AddFS appends one line "name sha256:<hex>" that covers every regular file
// of fsys: their slash-separated paths in lexical order, their sizes and
// their bytes. Use it for source trees that travel inside mlbuild (the
// embedded runtime library), whose every byte changes the built program.
func (k *Key) AddFS(name string, fsys fs.FS) error {
	h := sha256.New()
	err := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		f, err := fsys.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		// The file's hash, not its bytes, goes into the tree hash, so that
		// no concatenation of files can collide with another.
		fh := sha256.New()
		n, err := io.Copy(fh, f)
		if err != nil {
			return fmt.Errorf("hashing %s: %v", path, err)
		}
		fmt.Fprintf(h, "file %s %d %x\n", strconv.Quote(path), n, fh.Sum(nil))
		return nil
	})
	if err != nil {
		return fmt.Errorf("cache key %s: %v", name, err)
	}
	k.addLine(name, "sha256:"+hex.EncodeToString(h.Sum(nil)))
	return nil
}

func (k *Key) addLine(name, value string) {
	if !plainName(name) {
		name = strconv.Quote(name)
	}
	k.lines.WriteString(name)
	k.lines.WriteByte(' ')
	k.lines.WriteString(value)
	k.lines.WriteByte('\n')
}

// ID is the SHA-256 of a fixed header and the lines added so far. More lines
// may be added afterwards; ID then changes.
func (k *Key) ID() ActionID {
	h := sha256.New()
	io.WriteString(h, keyHeader)
	io.WriteString(h, k.lines.String())
	var id ActionID
	h.Sum(id[:0])
	return id
}

// Explain returns the lines that ID hashes, one "name value\n" per Add, for
// a person asking why a build missed the cache: compare the lines of two
// builds and the differing line names the input that changed.
func (k *Key) Explain() string { return k.lines.String() }

func inlineValue(v string) bool {
	if len(v) > maxInlineValue || strings.HasPrefix(v, "sha256:") {
		return false
	}
	for _, r := range v {
		if r == unicode.ReplacementChar || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

func plainName(n string) bool {
	if n == "" || n[0] == '"' {
		return false
	}
	for _, r := range n {
		if r == ' ' || r == unicode.ReplacementChar || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}
