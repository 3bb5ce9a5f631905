package cache

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"testing/fstest"
)

func keyOf(lines ...[2]string) *Key {
	k := NewKey()
	for _, l := range lines {
		k.Add(l[0], l[1])
	}
	return k
}

func TestKeyDeterministicAndOrderSensitive(t *testing.T) {
	a := keyOf([2]string{"backend", "cpu"}, [2]string{"target", "linux/amd64"})
	b := keyOf([2]string{"backend", "cpu"}, [2]string{"target", "linux/amd64"})
	if a.ID() != b.ID() {
		t.Errorf("same lines, different IDs: %s vs %s", a.ID(), b.ID())
	}
	swapped := keyOf([2]string{"target", "linux/amd64"}, [2]string{"backend", "cpu"})
	if a.ID() == swapped.ID() {
		t.Errorf("swapping two lines kept the ID %s", a.ID())
	}
	changed := keyOf([2]string{"backend", "metal"}, [2]string{"target", "linux/amd64"})
	if a.ID() == changed.ID() {
		t.Errorf("changing a value kept the ID %s", a.ID())
	}
	if NewKey().ID() == a.ID() {
		t.Errorf("empty key has the ID of a non-empty one")
	}
	// A space in a name must not let two different splits collide.
	x := keyOf([2]string{"a b", "c"})
	y := keyOf([2]string{"a", "b c"})
	if x.ID() == y.ID() {
		t.Errorf(`"a b"+"c" and "a"+"b c" collide: %q vs %q`, x.Explain(), y.Explain())
	}
	// More lines change the ID; ID may be asked for in between.
	before := a.ID()
	a.Add("go", "go1.26.8")
	if a.ID() == before {
		t.Errorf("adding a line kept the ID")
	}
}

func TestKeyIDHashesHeaderAndExplain(t *testing.T) {
	k := keyOf([2]string{"mlbuild", "v0.1.0"}, [2]string{"plan", strings.Repeat("x", 500)})
	want := sha256.Sum256([]byte(keyHeader + k.Explain()))
	if got := k.ID(); got != ActionID(want) {
		t.Errorf("ID() = %s, want sha256(header+Explain()) = %x", got, want)
	}
}

func TestKeyExplain(t *testing.T) {
	long := `{"ops":[` + strings.Repeat(`{"op":"gemm"},`, 20) + `]}`
	sum := func(s string) string {
		h := sha256.Sum256([]byte(s))
		return "sha256:" + hex.EncodeToString(h[:])
	}
	k := NewKey()
	k.Add("backend", "cpu")
	k.Add("plan", long)
	k.Add("note", "two\nlines")
	k.Add("fake", "sha256:0000")
	k.Add("with space", "v")
	k.Add("", "empty name")
	k.Add("tab", "a\tb")
	k.Add("blank", "")
	want := "backend cpu\n" +
		"plan " + sum(long) + "\n" +
		"note " + sum("two\nlines") + "\n" +
		"fake " + sum("sha256:0000") + "\n" +
		`"with space" v` + "\n" +
		`"" empty name` + "\n" +
		"tab " + sum("a\tb") + "\n" +
		"blank \n"
	if got := k.Explain(); got != want {
		t.Errorf("Explain() =\n%s\nwant\n%s", got, want)
	}
	// The boundary of inline values: 80 bytes inline, 81 hashed.
	k80 := keyOf([2]string{"v", strings.Repeat("a", 80)})
	if got := k80.Explain(); got != "v "+strings.Repeat("a", 80)+"\n" {
		t.Errorf("80-byte value not inline: %q", got)
	}
	k81 := keyOf([2]string{"v", strings.Repeat("a", 81)})
	if got := k81.Explain(); got != "v "+sum(strings.Repeat("a", 81))+"\n" {
		t.Errorf("81-byte value not hashed: %q", got)
	}
}

func TestKeyAddFS(t *testing.T) {
	base := fstest.MapFS{
		"rt/cpu/gemm.go": {Data: []byte("package cpu // gemm")},
		"rt/cpu/conv.go": {Data: []byte("package cpu // conv")},
		"go.mod":         {Data: []byte("module rt")},
	}
	id := func(fsys fstest.MapFS) ActionID {
		k := NewKey()
		if err := k.AddFS("runtime", fsys); err != nil {
			t.Fatal(err)
		}
		line := k.Explain()
		if !strings.HasPrefix(line, "runtime sha256:") || strings.Count(line, "\n") != 1 {
			t.Fatalf("AddFS wrote %q, want one line 'runtime sha256:...'", line)
		}
		return k.ID()
	}
	clone := func() fstest.MapFS {
		m := fstest.MapFS{}
		for k, v := range base {
			m[k] = &fstest.MapFile{Data: append([]byte(nil), v.Data...)}
		}
		return m
	}
	first := id(base)
	if again := id(clone()); again != first {
		t.Errorf("same tree, different IDs")
	}
	edited := clone()
	edited["rt/cpu/gemm.go"].Data[0] = 'P'
	if id(edited) == first {
		t.Errorf("editing a byte kept the ID")
	}
	renamed := clone()
	renamed["rt/cpu/gemm2.go"] = renamed["rt/cpu/gemm.go"]
	delete(renamed, "rt/cpu/gemm.go")
	if id(renamed) == first {
		t.Errorf("renaming a file kept the ID")
	}
	// Moving bytes from the end of one file to the start of the next must
	// change the ID (files are hashed one by one, with their sizes).
	moved := clone()
	moved["rt/cpu/conv.go"].Data = []byte("package cpu // con")
	moved["rt/cpu/gemm.go"].Data = []byte("vpackage cpu // gemm")
	if id(moved) == first {
		t.Errorf("moving a byte between files kept the ID")
	}
	if err := NewKey().AddFS("x", fstest.MapFS{"a": {Data: []byte("a")}}); err != nil {
		t.Errorf("AddFS: %v", err)
	}
}

func TestParseIDs(t *testing.T) {
	id := keyOf([2]string{"a", "b"}).ID()
	got, err := ParseActionID(id.String())
	if err != nil || got != id {
		t.Errorf("ParseActionID(%s) = %s, %v", id, got, err)
	}
	out := OutputID(sha256.Sum256([]byte("bytes")))
	gotOut, err := ParseOutputID(out.String())
	if err != nil || gotOut != out {
		t.Errorf("ParseOutputID(%s) = %s, %v", out, gotOut, err)
	}
	if len(id.Short()) != 12 || !strings.HasPrefix(id.String(), id.Short()) {
		t.Errorf("Short() = %q", id.Short())
	}
	for _, bad := range []string{"", "abc", strings.Repeat("g", 64), strings.ToUpper(id.String()), id.String() + "0"} {
		if _, err := ParseActionID(bad); err == nil {
			t.Errorf("ParseActionID(%q) accepted it", bad)
		}
	}
}
