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
	ops := make([]string, n)
	for i := range ops {
		ops[i] = "Relu"
	}
	return opChain(ops...)
}

// opChain encodes a model of opset 13 whose input x is [N, 4] and whose
// graph is a chain of one-input nodes of the ops given, named after their
// op and position (relu0, abs1).
func opChain(ops ...string) []byte {
	var g pbMsg
	prev := "x"
	for i, op := range ops {
		out := fmt.Sprintf("v%d", i)
		g = g.bytes(1, pbMsg(nil).str(1, prev).str(2, out).str(3, fmt.Sprintf("%s%d", strings.ToLower(op), i)).str(4, op))
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

// TestImportReportsPastRefusedNodes: the report lists the nodes refused
// after a first one (checked on a stand-in of its shape), and counts the
// nodes it could not check.
func TestImportReportsPastRefusedNodes(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "m.onnx")
	if err := os.WriteFile(file, opChain("Abs", "Relu", "Split", "Floor", "Relu"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := mlbuild(t, "import", file, "-o", dir)
	for _, want := range []string{
		"m.onnx: 3 node(s) cannot be imported:",
		`node "abs0" (Abs, opset 13): op Abs has no counterpart`,
		// checked on a stand-in of the Abs's output: before, not checked
		`node "split2" (Split, opset 13): Split along the batch axis`,
		`(its input comes from refused node "abs0"`,
		`node "floor3" (Floor, opset 13): op Floor has no counterpart`,
		"1 more node(s) read values of the nodes above whose shape is not known, and were not checked",
	} {
		if code != ExitInvalid || !strings.Contains(stderr, want) {
			t.Errorf("exit %d, stderr lacks %q:\n%s", code, want, stderr)
		}
	}
}
