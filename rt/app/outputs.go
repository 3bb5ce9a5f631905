package app

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// checkReplaceable refuses, before any training, to let train's --out or
// --checkpoint replace a file that an mlbuild program did not write: a
// typo in a path must not cost a user's data, and finding out after hours
// of training would cost the run. A missing file, a safetensors file whose
// metadata names an mlbuild model, or force make it replaceable.
func checkReplaceable(flagName, path string, force bool) error {
	fi, err := os.Stat(path)
	if err != nil {
		return nil // absent (or unreadable: the write will say why)
	}
	if fi.IsDir() {
		return fmt.Errorf("--%s %s is a directory; name a file", flagName, path)
	}
	if force || writtenByMlbuild(path) {
		return nil
	}
	return fmt.Errorf("--%s %s exists and is not a weights file written by an mlbuild program; choose another path, remove it, or pass --force to replace it", flagName, path)
}

// writtenByMlbuild reads only the header of a safetensors file and
// reports whether its metadata carries mlbuild.model, as every file that
// saveWeights and saveCheckpoint write does.
func writtenByMlbuild(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var n [8]byte
	if _, err := io.ReadFull(f, n[:]); err != nil {
		return false
	}
	size := binary.LittleEndian.Uint64(n[:])
	if size < 2 || size > 100<<20 {
		return false
	}
	header := make([]byte, size)
	if _, err := io.ReadFull(f, header); err != nil {
		return false
	}
	var h struct {
		Metadata map[string]string `json:"__metadata__"`
	}
	if json.Unmarshal(header, &h) != nil {
		return false
	}
	_, ok := h.Metadata["mlbuild.model"]
	return ok
}
