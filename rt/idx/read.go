package idx

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
)

// gzipMagic starts every gzip stream; files are recognised by it, not by a
// .gz in their name.
var gzipMagic = []byte{0x1f, 0x8b}

// IsGzip reports whether data starts like a gzip stream.
func IsGzip(data []byte) bool { return bytes.HasPrefix(data, gzipMagic) }

// decoded is a checked IDX file: its dimensions, its payload and how to
// release the memory behind it.
type decoded struct {
	dims    []int
	payload []byte
	release func() error
}

// decodeBytes checks an IDX file held in memory (raw or gzip) and returns
// its payload; for a raw file the payload is a view into data.
func decodeBytes(name string, data []byte, want kind) (decoded, error) {
	if IsGzip(data) {
		return decodeGzip(name, bytes.NewReader(data), want)
	}
	if len(data) < 4 {
		return decoded{}, fmt.Errorf("%s: truncated: an IDX file starts with a 4-byte magic number, but the file has %d bytes", name, len(data))
	}
	if err := checkMagic(name, [4]byte(data[:4]), want); err != nil {
		return decoded{}, err
	}
	if len(data) < want.headerLen() {
		return decoded{}, fmt.Errorf("%s: truncated: the header of %s file is %d bytes, but the file has %d", name, want.article(), want.headerLen(), len(data))
	}
	dims, size, err := parseDims(name, data, want)
	if err != nil {
		return decoded{}, err
	}
	need := int64(want.headerLen()) + int64(size)
	if int64(len(data)) != need {
		return decoded{}, sizeError(name, data, want, need, int64(len(data)), false)
	}
	return decoded{dims: dims, payload: data[want.headerLen():need:need]}, nil
}

// decodeGzip decompresses and checks an IDX file. It reads the header first
// and never holds more than the header declares (plus a one-byte probe for
// trailing data), and it allocates as data arrives, so a small file that
// claims huge dimensions costs little memory.
func decodeGzip(name string, r io.Reader, want kind) (decoded, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return decoded{}, fmt.Errorf("%s: corrupt gzip data: %v", name, err)
	}
	header := make([]byte, want.headerLen())
	n, err := io.ReadFull(zr, header[:4])
	if err != nil {
		return decoded{}, gzipShort(name, err, fmt.Sprintf("an IDX file starts with a 4-byte magic number, but the decompressed file has %d bytes", n))
	}
	if err := checkMagic(name, [4]byte(header[:4]), want); err != nil {
		return decoded{}, err
	}
	if n, err := io.ReadFull(zr, header[4:]); err != nil {
		return decoded{}, gzipShort(name, err, fmt.Sprintf("the header of %s file is %d bytes, but the decompressed file has %d", want.article(), len(header), 4+n))
	}
	dims, size, err := parseDims(name, header, want)
	if err != nil {
		return decoded{}, err
	}
	var buf bytes.Buffer
	buf.Grow(min(size, 1<<20))
	got, err := io.Copy(&buf, io.LimitReader(zr, int64(size)+1))
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			got = int64(buf.Len())
			return decoded{}, sizeError(name, header, want, int64(len(header))+int64(size), int64(len(header))+got, true)
		}
		return decoded{}, fmt.Errorf("%s: corrupt gzip data: %v", name, err)
	}
	if got != int64(size) {
		return decoded{}, sizeError(name, header, want, int64(len(header))+int64(size), int64(len(header))+got, true)
	}
	return decoded{dims: dims, payload: buf.Bytes()}, nil
}

// gzipShort turns an early end of a gzip stream into a message: a stream cut
// short is a truncated file, anything else is corrupt data.
func gzipShort(name string, err error, short string) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%s: truncated: %s", name, short)
	}
	return fmt.Errorf("%s: corrupt gzip data: %v", name, err)
}

// openFile reads the IDX file at path: memory-mapped when it is raw and the
// OS supports it, read into memory otherwise.
func openFile(path string, want kind) (decoded, error) {
	f, err := os.Open(path)
	if err != nil {
		return decoded{}, err // *PathError names the file
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return decoded{}, err
	}
	if fi.IsDir() {
		return decoded{}, fmt.Errorf("%s: is a directory, not an IDX %s file", path, want.noun)
	}
	br := bufio.NewReader(f)
	if head, _ := br.Peek(2); bytes.Equal(head, gzipMagic) {
		return decodeGzip(path, br, want)
	}
	if fi.Size() > int64(want.headerLen())+MaxElements {
		// Too large for its kind whatever the header says; read just the
		// header so the message can say what it declares.
		head := make([]byte, want.headerLen())
		n, _ := io.ReadFull(br, head)
		if err := checkMagic(path, [4]byte(head[:4]), want); err != nil || n < len(head) {
			return decodeBytes(path, head[:n], want) // says what is wrong with the header
		}
		_, size, err := parseDims(path, head, want)
		if err != nil {
			return decoded{}, err
		}
		return decoded{}, sizeError(path, head, want, int64(len(head))+int64(size), fi.Size(), false)
	}
	if data, unmap, err := mapFile(f, fi.Size()); err == nil {
		d, err := decodeBytes(path, data, want)
		if err != nil {
			unmap()
			return decoded{}, err
		}
		d.release = unmap
		return d, nil
	}
	data, err := io.ReadAll(br)
	if err != nil {
		return decoded{}, fmt.Errorf("%s: %w", path, err)
	}
	return decodeBytes(path, data, want)
}
