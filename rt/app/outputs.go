package app

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/mlbuild/mlbuild/rt/jsontext"
	"github.com/mlbuild/mlbuild/rt/npy"
)

// checkReplaceable refuses, before any training, to let train's --out or
// --checkpoint replace a file that an mlbuild program did not write: a
// typo in a path must not cost a user's data, and finding out after hours
// of training would cost the run. A missing file, a safetensors file whose
// metadata names an mlbuild model (and that `mlbuild import` did not
// write: imported weights are a user's converted model, the default --out
// of a spec written beside them), or force make it replaceable.
func checkReplaceable(flagName, path string, force bool) error {
	fi, err := os.Stat(path)
	if err != nil {
		return nil // absent (or unreadable: the write will say why)
	}
	if fi.IsDir() {
		return fmt.Errorf("--%s %s is a directory; name a file", flagName, path)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("--%s %s is %s; name a file", flagName, path, fileKind(fi.Mode()))
	}
	if force {
		return nil
	}
	if src := importedFrom(path); src != "" {
		return fmt.Errorf("--%s %s holds the weights `mlbuild import` converted from %s; choose another path (train --init %s --out NEW.safetensors starts from them), or pass --force to replace them", flagName, path, src, path)
	}
	if writtenByMlbuild(path) {
		return nil
	}
	return fmt.Errorf("--%s %s exists and is not a weights file written by an mlbuild program; choose another path, remove it, or pass --force to replace it", flagName, path)
}

// importedFrom is the model file that `mlbuild import` converted into the
// weights at path (its mlbuild.source metadata), or "".
func importedFrom(path string) string {
	md, err := readMetadata(path)
	if err != nil {
		return ""
	}
	return md["mlbuild.source"]
}

// writtenByMlbuild reads only the header of a safetensors file and
// reports whether its metadata carries mlbuild.model, as every file that
// saveWeights and saveCheckpoint write does.
func writtenByMlbuild(path string) bool {
	md, err := readMetadata(path)
	if err != nil {
		return false
	}
	_, ok := md["mlbuild.model"]
	return ok
}

// readMetadata reads the __metadata__ of a safetensors file's header,
// without its tensors.
func readMetadata(path string) (map[string]string, error) {
	if err := regularFiles(path); err != nil {
		return nil, err // a FIFO would be waited on for ever
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var n [8]byte
	if _, err := io.ReadFull(f, n[:]); err != nil {
		return nil, fmt.Errorf("%s is not a safetensors file (it is shorter than a header)", path)
	}
	size := binary.LittleEndian.Uint64(n[:])
	if size < 2 || size > 100<<20 {
		return nil, fmt.Errorf("%s is not a safetensors file (its header would be %d bytes)", path, size)
	}
	header := make([]byte, size)
	if _, err := io.ReadFull(f, header); err != nil {
		return nil, fmt.Errorf("%s is not a safetensors file (it ends inside its %d-byte header)", path, size)
	}
	h, err := jsontext.Parse(header)
	if err != nil {
		return nil, fmt.Errorf("%s is not a safetensors file (its header is not JSON: %v)", path, err)
	}
	if h.Kind != jsontext.Object {
		return nil, fmt.Errorf("%s is not a safetensors file (its header is a JSON %s, not an object)", path, h.Kind)
	}
	v, ok := h.Lookup("__metadata__")
	if !ok || v.Kind == jsontext.Null {
		return nil, nil
	}
	md := map[string]string{}
	for _, f := range v.Fields {
		if f.Value.Kind != jsontext.String {
			return nil, fmt.Errorf("%s: the value of __metadata__ %q is a JSON %s, not a string", path, f.Key, f.Value.Kind)
		}
		md[f.Key] = f.Value.Text
	}
	return md, nil
}

// checkWritable makes sure, before any training, that a file can be
// written at path: its folder exists and takes new files (the writes are
// atomic, so they create a file next to path and rename it). Finding out
// after the first epoch would cost the epoch.
func checkWritable(flagName, path string) error {
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("--%s %s: the folder %s does not exist; create it first (mkdir -p %s) or choose another path", flagName, path, dir, dir)
	case err != nil:
		return fmt.Errorf("--%s %s: %v", flagName, path, err)
	case !fi.IsDir():
		return fmt.Errorf("--%s %s: %s is not a folder", flagName, path, dir)
	}
	probe, err := os.CreateTemp(dir, "."+filepath.Base(path)+".probe-")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("--%s %s: cannot write in the folder %s: %v", flagName, path, dir, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	return nil
}

// samePath reports whether two paths name one file: equal once made
// absolute and cleaned, one existing file by two names (a link, a hard
// link), or, for a file not there yet, one name in one folder reached by
// two paths. (os.SameFile rather than filepath.EvalSymlinks, which every
// program would link.)
func samePath(a, b string) bool {
	if absPath(a) == absPath(b) {
		return true
	}
	if fa, err := os.Stat(a); err == nil {
		fb, err := os.Stat(b)
		return err == nil && os.SameFile(fa, fb)
	}
	if _, err := os.Stat(b); err == nil || filepath.Base(a) != filepath.Base(b) {
		return false // b exists and a does not, or the names differ
	}
	da, errA := os.Stat(filepath.Dir(absPath(a)))
	db, errB := os.Stat(filepath.Dir(absPath(b)))
	return errA == nil && errB == nil && os.SameFile(da, db)
}

// absPath is path made absolute and cleaned (cleaned alone when the
// working folder is unknown).
func absPath(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return filepath.Clean(path)
}

// distinctOutputs refuses two of train's files that are one file: --out
// and --checkpoint would overwrite each other (the checkpoint destroyed
// by the weights, or the weights by the next checkpoint), --metrics
// would be appended to weights, and --out on the checkpoint being resumed
// would replace it. Empty paths are skipped.
func distinctOutputs(o *trainOptions) error {
	files := []struct{ flag, path string }{{"out", o.out}, {"checkpoint", o.checkpoint}, {"metrics", o.metrics}, {"resume", o.resume}}
	for i, a := range files {
		for _, b := range files[i+1:] {
			if a.path == "" || b.path == "" || a.flag == "checkpoint" && b.flag == "resume" {
				continue // a resumed run writes on its checkpoint
			}
			if samePath(a.path, b.path) {
				return usageError{fmt.Sprintf("--%s %s and --%s %s are the same file; give each its own path", a.flag, a.path, b.flag, b.path)}
			}
		}
	}
	return nil
}

// maxMetricsLine bounds what checkMetricsFile reads of a file's first line.
const maxMetricsLine = 4096

// checkMetricsFile refuses, before training, to append metrics to a file
// that is not a metrics file an mlbuild program wrote (without force): a
// file that exists, is not empty and does not open with a line of
// {"event": ..., "step": ...} JSON, as progress.Metrics writes. Appending
// to weights or notes would corrupt them.
func checkMetricsFile(path string, force bool) error {
	fi, err := os.Stat(path)
	if err != nil {
		return nil // absent (or unreadable: the open will say why)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("--metrics %s is %s, not a file", path, fileKind(fi.Mode()))
	}
	if force || fi.Size() == 0 || isMetricsFile(path) {
		return nil
	}
	return fmt.Errorf("--metrics %s exists and is not a metrics file written by an mlbuild program (its first line is not one of their JSON lines); choose another path, remove it, or pass --force to append to it", path)
}

// isMetricsFile reports whether the first line of the file at path is a
// metrics line of an mlbuild program.
func isMetricsFile(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	buf := make([]byte, maxMetricsLine)
	n, _ := io.ReadFull(f, buf)
	line, _, ok := strings.Cut(string(buf[:n]), "\n")
	if !ok {
		return false
	}
	// As progress.AppendEvent writes it: {"event":"…","epoch":…,"step":…
	return strings.HasPrefix(line, `{"event":"`) && strings.Contains(line, `,"step":`) && strings.HasSuffix(line, "}")
}

// checkOutputArray refuses, before any prediction, to let predict's
// --output replace a file that predict did not write (its header carries
// npy.Mark), without force; a folder is refused always.
func checkOutputArray(path string, force bool) error {
	fi, err := os.Stat(path)
	if err != nil {
		return nil // absent (or unreadable: the write will say why)
	}
	if fi.IsDir() {
		return fmt.Errorf("--output %s is a directory; name a .npy file", path)
	}
	if force || npy.IsMarked(path) {
		return nil
	}
	return fmt.Errorf("--output %s exists and is not an array written by predict; choose another path, remove it, or pass --force to replace it", path)
}
