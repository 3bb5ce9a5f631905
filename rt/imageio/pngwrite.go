package imageio

import (
	"encoding/binary"
	"hash/adler32"
	"hash/crc32"
)

// EncodeGrayPNG writes 8-bit grey pixels (w×h, row by row) as a PNG file
// whose image data is stored, not compressed: the deflate blocks of its
// zlib stream are of the stored kind. Every PNG reader reads it; it is
// larger than a compressed one (a byte a pixel, plus 6 per row and per
// 64 KiB), which for the small images of an IDX file (784 bytes for a
// digit) is little, and a program that writes it needs no deflate
// compressor (image/png's encoder would link compress/flate's).
func EncodeGrayPNG(pix []byte, w, h int) []byte {
	// The filtered rows: each starts with filter type 0 (none).
	raw := make([]byte, 0, h*(w+1))
	for y := 0; y < h; y++ {
		raw = append(raw, 0)
		raw = append(raw, pix[y*w:(y+1)*w]...)
	}
	// zlib: header (deflate, 32 KiB window, no dictionary, check bits),
	// stored blocks of at most 65535 bytes, Adler-32 of the raw data.
	z := []byte{0x78, 0x01}
	for start := 0; ; start += 0xffff {
		n := min(len(raw)-start, 0xffff)
		final := byte(0)
		if start+n == len(raw) {
			final = 1
		}
		z = append(z, final, byte(n), byte(n>>8), ^byte(n), ^byte(n>>8))
		z = append(z, raw[start:start+n]...)
		if final == 1 {
			break
		}
	}
	z = binary.BigEndian.AppendUint32(z, adler32.Checksum(raw))

	out := []byte("\x89PNG\r\n\x1a\n")
	ihdr := binary.BigEndian.AppendUint32(nil, uint32(w))
	ihdr = binary.BigEndian.AppendUint32(ihdr, uint32(h))
	ihdr = append(ihdr, 8, 0, 0, 0, 0) // 8-bit grey, deflate, filtering method 0, no interlace
	out = appendChunk(out, "IHDR", ihdr)
	out = appendChunk(out, "IDAT", z)
	return appendChunk(out, "IEND", nil)
}

// appendChunk appends a PNG chunk: length, type, data, CRC of type and data.
func appendChunk(b []byte, kind string, data []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
	start := len(b)
	b = append(b, kind...)
	b = append(b, data...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b[start:]))
}
