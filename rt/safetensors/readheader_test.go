package safetensors

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestReadHeader gives the names, dtypes and shapes Read gives, without
// the data, and checks the layout against the file's size.
func TestReadHeader(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.safetensors")
	data := handMade(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F16","shape":[3,1],"data_offsets":[8,14]},"__metadata__":{"k":"v"}}`, make([]byte, 14))
	os.WriteFile(path, data, 0o644)
	h, err := ReadHeader(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(h.Specs(), f.Specs(), func(a, b Spec) bool { return a.Name == b.Name && slices.Equal(a.Shape, b.Shape) }) || h.Metadata["k"] != "v" || h.Tensors[1].DType != "F16" || h.Tensors[0].Data != nil {
		t.Errorf("header %+v, file %+v", h.Tensors, f.Specs())
	}
	os.WriteFile(path, data[:len(data)-2], 0o644)
	if _, err := ReadHeader(path); err == nil || !strings.Contains(err.Error(), `tensor "b": truncated`) {
		t.Errorf("a file cut short: %v", err)
	}
}
