package onnx

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// MaxFileSize bounds an .onnx file (protobuf's own limit is 2 GiB); larger
// models keep their weights in external data files.
const MaxFileSize = 2 << 30

// FileError is an .onnx file that cannot be read or decoded: the file and
// the cause (a *DecodeError for malformed content).
type FileError struct {
	Path string
	Err  error
}

func (e *FileError) Error() string { return e.Path + ": " + e.Err.Error() }
func (e *FileError) Unwrap() error { return e.Err }

// ReadFile reads and decodes an .onnx file and loads the external data of
// its initializers. External data is read through an os.Root at the
// model's folder, so a location that leaves the folder (an absolute path,
// "..", or a symbolic link pointing out) is an error, never a read.
func ReadFile(path string) (*Model, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &FileError{path, err}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, &FileError{path, err}
	}
	if !fi.Mode().IsRegular() {
		return nil, &FileError{path, errors.New("not a regular file")}
	}
	if fi.Size() > MaxFileSize {
		return nil, &FileError{path, fmt.Errorf("%d bytes is above the limit of %d for an .onnx file", fi.Size(), int64(MaxFileSize))}
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, &FileError{path, err}
	}
	m, err := Decode(data)
	if err != nil {
		return nil, &FileError{path, err}
	}
	var external []*Tensor
	for _, t := range m.Graph.Initializers {
		if t.External != nil {
			external = append(external, t)
		}
	}
	for _, n := range m.Graph.Nodes {
		for _, a := range n.Attrs {
			if a.T != nil && a.T.External != nil {
				external = append(external, a.T)
			}
		}
	}
	if len(external) == 0 {
		return m, nil
	}
	root, err := os.OpenRoot(filepath.Dir(path))
	if err != nil {
		return nil, &FileError{path, err}
	}
	defer root.Close()
	for _, t := range external {
		if err := loadExternal(root, t); err != nil {
			return nil, &FileError{path, fmt.Errorf("tensor %q: external data %q: %v", t.Name, t.External.Location, err)}
		}
	}
	return m, nil
}

// loadExternal reads t's bytes from its external file, inside root.
func loadExternal(root *os.Root, t *Tensor) error {
	ext := t.External
	if !filepath.IsLocal(ext.Location) {
		return errors.New("the location leaves the model's folder; external data must be a file next to the model or below it")
	}
	f, err := root.Open(ext.Location)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return errors.New("not a regular file")
	}
	size := t.DataType.size()
	if size == 0 {
		return fmt.Errorf("element type %v cannot be stored as external data", t.DataType)
	}
	want := t.NumElements() * int64(size)
	if ext.Length >= 0 && ext.Length != want {
		return fmt.Errorf("length %d, but shape %v of %v needs %d bytes", ext.Length, t.Dims, t.DataType, want)
	}
	if ext.Offset > fi.Size() || fi.Size()-ext.Offset < want {
		return fmt.Errorf("offset %d + %d bytes runs past the end of the %d-byte file", ext.Offset, want, fi.Size())
	}
	buf := make([]byte, want)
	if _, err := f.ReadAt(buf, ext.Offset); err != nil {
		return err
	}
	t.raw, t.hasRaw, t.External = buf, true, nil
	return nil
}
