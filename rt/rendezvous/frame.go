package rendezvous

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The wire format. Every message is one frame:
//
//	magic "MLBR" (4 bytes) | version (1) | type (1) | body length (4, big endian) | body
//
// and a reader refuses a frame of another magic or version, of a type it
// does not expect at that point, or whose body is longer than that type's
// bound (maxBody), before it reads the body: garbage costs ten bytes and
// a clear error, never an allocation the peer chose.
const (
	frameMagic = "MLBR"
	// Version is the protocol's version; a member of another version is
	// refused with both numbers.
	Version    = 1
	headerSize = 10
)

// msgType is a frame's type.
type msgType byte

// The messages, in the order of a join (docs/distributed.md#protocol).
const (
	msgHello     msgType = 1 // member → 0: its nonce
	msgChallenge msgType = 2 // 0 → member: 0's nonce and proof of the token
	msgJoin      msgType = 3 // member → 0: who it is, and proof of the token
	msgWelcome   msgType = 4 // 0 → member: every member and the payload, authenticated
	msgRefuse    msgType = 5 // either way: why the rendezvous ends for this peer

	// The control channel, after the welcome (control.go).
	msgBeat msgType = 6 // either way: still here
	msgFail msgType = 7 // either way: a member failed (who, where, why), authenticated
	msgDone msgType = 8 // either way: a member finished normally, authenticated
)

// String names the message in errors.
func (t msgType) String() string {
	switch t {
	case msgHello:
		return "hello"
	case msgChallenge:
		return "challenge"
	case msgJoin:
		return "join"
	case msgWelcome:
		return "welcome"
	case msgRefuse:
		return "refuse"
	case msgBeat:
		return "heartbeat"
	case msgFail:
		return "failure"
	case msgDone:
		return "done"
	}
	return fmt.Sprintf("type %d", byte(t))
}

// Bounds of what a frame carries.
const (
	nonceSize = 32
	macSize   = 32 // HMAC-SHA256
	// MaxMembers is the most processes one rendezvous admits.
	MaxMembers = 1024
	// MaxHost is the longest host name a member may report (DNS's 253,
	// rounded up).
	MaxHost = 255
	// MaxPayload is the most bytes member 0 may hand to the others (the
	// NCCL unique id is 128).
	MaxPayload = 4096
	maxReason  = 1024
)

// maxBody is each type's largest body.
var maxBody = map[msgType]int{
	msgHello:     nonceSize,
	msgChallenge: nonceSize + macSize,
	msgJoin:      4 + 4 + 4 + 2 + MaxHost + macSize,
	msgWelcome:   4 + MaxMembers*(4+2+MaxHost) + 4 + MaxPayload + macSize,
	msgRefuse:    2 + maxReason,
	msgBeat:      0,
	msgFail:      4 + 2 + MaxHost + 2 + maxReason + macSize,
	msgDone:      4 + macSize,
}

// errGarbage is wrapped by every error about bytes that are not this
// protocol.
var errGarbage = errors.New("not an mlbuild rendezvous message")

// writeFrame writes one frame.
func writeFrame(w io.Writer, t msgType, body []byte) error {
	if len(body) > maxBody[t] {
		return fmt.Errorf("rendezvous: a %s of %d bytes exceeds its bound of %d", t, len(body), maxBody[t])
	}
	buf := make([]byte, headerSize+len(body))
	copy(buf, frameMagic)
	buf[4] = Version
	buf[5] = byte(t)
	binary.BigEndian.PutUint32(buf[6:], uint32(len(body)))
	copy(buf[headerSize:], body)
	_, err := w.Write(buf)
	return err
}

// readFrame reads one frame whose type is one of want. A refuse frame is
// always accepted (the caller turns it into the peer's error).
func readFrame(r io.Reader, want ...msgType) (msgType, []byte, error) {
	var h [headerSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	if string(h[:4]) != frameMagic {
		return 0, nil, fmt.Errorf("%w: it begins %q", errGarbage, h[:4])
	}
	if h[4] != Version {
		return 0, nil, fmt.Errorf("protocol version %d, this mlbuild speaks %d: run the same mlbuild build on every node", h[4], Version)
	}
	t := msgType(h[5])
	n := binary.BigEndian.Uint32(h[6:])
	ok := t == msgRefuse
	for _, w := range want {
		ok = ok || t == w
	}
	bound, known := maxBody[t]
	if !ok || !known {
		return 0, nil, fmt.Errorf("%w: a %s frame where a %s was expected", errGarbage, t, want[0])
	}
	if int64(n) > int64(bound) {
		return 0, nil, fmt.Errorf("%w: a %s frame of %d bytes, over its bound of %d", errGarbage, t, n, bound)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, nil, fmt.Errorf("a %s frame cut short after its header: %w", t, err)
	}
	return t, body, nil
}

// encoder appends fields to a body.
type encoder struct{ b []byte }

func (e *encoder) u32(v uint32) { e.b = binary.BigEndian.AppendUint32(e.b, v) }
func (e *encoder) bytes(p []byte) {
	e.b = append(e.b, p...)
}
func (e *encoder) str(s string) {
	e.b = binary.BigEndian.AppendUint16(e.b, uint16(len(s)))
	e.b = append(e.b, s...)
}

// decoder reads fields from a body, remembering the first shortfall.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n > len(d.b) {
		d.err = fmt.Errorf("%w: a field of %d bytes where %d remain", errGarbage, n, len(d.b))
		return nil
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) u32() uint32 {
	p := d.take(4)
	if p == nil {
		return 0
	}
	return binary.BigEndian.Uint32(p)
}

func (d *decoder) str(max int) string {
	p := d.take(2)
	if p == nil {
		return ""
	}
	n := int(binary.BigEndian.Uint16(p))
	if n > max {
		d.err = fmt.Errorf("%w: a string of %d bytes, over its bound of %d", errGarbage, n, max)
		return ""
	}
	return string(d.take(n))
}

// end reports the first shortfall, or bytes left over.
func (d *decoder) end() error {
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%w: %d bytes past the last field", errGarbage, len(d.b))
	}
	return d.err
}
