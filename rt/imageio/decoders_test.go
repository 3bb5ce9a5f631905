package imageio

// The decoders of PNG and JPEG join package image's registry when imported
// (see decodeRegistered); the programs that read images import them in
// their main.go, and these tests import them here.
import (
	_ "image/jpeg"
	_ "image/png"
)
