package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pbMsg writes protocol buffer fields, enough for the small ONNX models
// the tests build (field numbers from onnx.proto).
type pbMsg []byte

func (b pbMsg) key(field, wire int) pbMsg { return binary.AppendUvarint(b, uint64(field<<3|wire)) }
func (b pbMsg) int(field int, v int64) pbMsg {
	return binary.AppendUvarint(b.key(field, 0), uint64(v))
}
func (b pbMsg) bytes(field int, v []byte) pbMsg {
	return append(binary.AppendUvarint(b.key(field, 2), uint64(len(v))), v...)
}
func (b pbMsg) str(field int, s string) pbMsg { return b.bytes(field, []byte(s)) }

// reluChain encodes a model of opset 13 whose input x is [N, 4] and whose
// graph is n Relu nodes in a chain.
func reluChain(n int) []byte {
	var g pbMsg
	prev := "x"
	for i := range n {
		out := fmt.Sprintf("v%d", i)
		g = g.bytes(1, pbMsg(nil).str(1, prev).str(2, out).str(3, fmt.Sprintf("relu%d", i)).str(4, "Relu"))
		prev = out
	}
	shape := pbMsg(nil).bytes(1, pbMsg(nil).str(2, "N")).bytes(1, pbMsg(nil).int(1, 4))
	tensorType := pbMsg(nil).int(1, 1).bytes(2, shape)
	g = g.str(2, "chain").
		bytes(11, pbMsg(nil).str(1, "x").bytes(2, pbMsg(nil).bytes(1, tensorType))).
		bytes(12, pbMsg(nil).str(1, prev))
	return pbMsg(nil).int(1, 8).bytes(7, g).bytes(8, pbMsg(nil).int(2, 13))
}

// TestImportSizeLimit: a model whose spec would be larger than mlbuild
// evaluates is refused as too large (exit 1, the limit stated, nothing
// written); it used to exit 70 as an importer bug. A short chain of the
// same ops imports.
func TestImportSizeLimit(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []int{3, 20000} {
		file := filepath.Join(dir, fmt.Sprintf("chain%d.onnx", n))
		if err := os.WriteFile(file, reluChain(n), 0o644); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := mlbuild(t, "import", file, "-o", dir)
		_, written := os.Stat(filepath.Join(dir, fmt.Sprintf("chain%d.cue", n)))
		if n == 3 {
			if code != ExitOK || written != nil {
				t.Errorf("3 nodes: exit %d, %s%s", code, stdout, stderr)
			}
			continue
		}
		want := "the model is too large for mlbuild: its spec would have 20000 layers in"
		if code != ExitInvalid || !strings.Contains(stderr, want) || !strings.Contains(stderr, "more than the 1048576 bytes (1 MiB) mlbuild evaluates in one spec") || strings.Contains(stderr, "bug") {
			t.Errorf("20000 nodes: exit %d, stderr %q; want exit %d and %q", code, stderr, ExitInvalid, want)
		}
		if written == nil {
			t.Errorf("20000 nodes: the spec was written")
		}
	}
}
