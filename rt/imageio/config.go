package imageio

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"image"
	"io"
	"os"
)

// maxNetpbmHeader bounds the header (comments included) ConfigFile reads
// of a PGM or PPM file.
const maxNetpbmHeader = 4096

// ConfigFile reads the header of the image at path, and no pixels, and
// returns the image's height and width: the cheap check of every file of
// an image folder before training, so that a corrupt file is named before
// the first step rather than when its batch comes up. For a raw PGM or
// PPM it also checks that the file is long enough for its pixels. Errors
// name the file, as LoadChannels's do; a file whose header passes may
// still fail to decode.
func ConfigFile(path string) (h, w int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err // *PathError names the file
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	if !fi.Mode().IsRegular() {
		return 0, 0, fmt.Errorf("%s: not a regular file, not an image", path)
	}
	h, w, err = config(bufio.NewReaderSize(f, maxNetpbmHeader), fi.Size())
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", path, err)
	}
	return h, w, nil
}

// Config is ConfigFile for an image in memory; name is used in messages.
func Config(name string, data []byte) (h, w int, err error) {
	h, w, err = config(bufio.NewReaderSize(bytes.NewReader(data), maxNetpbmHeader), int64(len(data)))
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", name, err)
	}
	return h, w, nil
}

func config(br *bufio.Reader, size int64) (h, w int, err error) {
	head, _ := br.Peek(16)
	var format, name string
	var word func(error) error
	switch {
	case bytes.HasPrefix(head, pngMagic):
		format, name, word = "PNG", "png", pngError
	case bytes.HasPrefix(head, jpegMagic):
		format, name, word = "JPEG", "jpeg", jpegError
	case len(head) >= 2 && head[0] == 'P' && head[1] >= '1' && head[1] <= '7':
		return netpbmConfig(br, size)
	default:
		return 0, 0, notAnImage(head)
	}
	cfg, got, err := image.DecodeConfig(br)
	if errors.Is(err, image.ErrFormat) || err == nil && got != name {
		return 0, 0, fmt.Errorf("this program cannot decode %s images: it was built without image/%s (a bug in mlbuild)", format, name)
	}
	if err != nil {
		return 0, 0, word(err)
	}
	if err := checkSize(format, cfg.Width, cfg.Height); err != nil {
		return 0, 0, err
	}
	return cfg.Height, cfg.Width, nil
}

// netpbmConfig reads a PGM or PPM header and, for a raw one, checks the
// file's size against its pixels.
func netpbmConfig(br *bufio.Reader, size int64) (h, w int, err error) {
	hdr, perr := br.Peek(maxNetpbmHeader)
	if perr != nil && perr != io.EOF && perr != bufio.ErrBufferFull {
		return 0, 0, perr
	}
	format, r, w, h, maxval, err := netpbmHeader(hdr)
	var trunc errTruncated
	if errors.As(err, &trunc) && int64(len(hdr)) < size {
		return 0, 0, fmt.Errorf("the header is longer than %d bytes", maxNetpbmHeader)
	}
	if err != nil {
		return 0, 0, err
	}
	if !format.plain {
		bytesPer := int64(1)
		if maxval >= 256 {
			bytesPer = 2
		}
		need := int64(w) * int64(h) * int64(format.channels) * bytesPer
		if have := size - int64(r.pos) - 1; have < need {
			return 0, 0, fmt.Errorf("truncated: a %dx%d %s image with maxval %d needs %d bytes of pixels, the file has %d", w, h, format.name, maxval, need, max(have, 0))
		}
	}
	return h, w, nil
}
