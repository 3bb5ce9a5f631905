package app

// rt/imageio decodes PNG and JPEG through package image's registry of
// formats, which image/png and image/jpeg join when imported; the programs
// that read images import them in their main.go, and these tests here.
import (
	_ "image/jpeg"
	_ "image/png"
)
