package app

import (
	"bytes"
	_ "embed"
	"testing"
	"unsafe"
)

// mapstateImage stands for embedded weights: bytes in the test binary's
// own data, as go:embed puts a program's weights.
//
//go:embed testdata/mapstate.bin
var mapstateImage []byte

// TestMapState: an arena made by mapState holds the image (from the
// executable's pages, not a copy) and zeros after it; writing to the arena
// leaves the image as it was (copy on write); bytes that are not part of
// the executable are refused, so the caller copies.
func TestMapState(t *testing.T) {
	image := mapstateImage[:len(mapstateImage)/4*4]
	size := len(image)/4 + 3000
	arena := mapState(image, size)
	if arena == nil {
		t.Fatalf("mapState refused the test binary's embedded bytes (at %p)", unsafe.SliceData(image))
	}
	if len(arena) != size {
		t.Fatalf("the arena has %d floats, want %d", len(arena), size)
	}
	raw := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(arena))), 4*size)
	if unsafe.SliceData(raw) == unsafe.SliceData(image) {
		t.Fatal("the arena is the image itself, not a mapping of its pages")
	}
	if !bytes.Equal(raw[:len(image)], image) {
		t.Fatal("the arena does not start with the image")
	}
	for i, b := range raw[len(image):] {
		if b != 0 {
			t.Fatalf("byte %d after the image is %d, not zero", i, b)
		}
	}
	before := bytes.Clone(image)
	for i := range arena {
		arena[i] = float32(i)
	}
	if !bytes.Equal(image, before) {
		t.Error("writing to the arena changed the embedded bytes")
	}
	if got := mapState(bytes.Clone(image), size); got != nil {
		t.Error("mapState mapped bytes that are not in the executable")
	}
	if got := mapState(image, len(image)/4-1); got != nil {
		t.Error("mapState made an arena smaller than the image")
	}
}
