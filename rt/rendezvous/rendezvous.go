// Package rendezvous brings the processes of a distributed training run
// together before NCCL starts: member 0 listens on a TCP port, every other
// member connects to it, each side proves to the other that it knows the
// shared token (HMAC-SHA256 challenge and response both ways; the token
// itself never crosses the wire), and member 0 then tells every member who
// the others are (host and GPU count, so each knows its global GPU ranks)
// and hands out a payload: the NCCL unique id that NCCL's own bootstrap
// starts from.
//
// Every message is a length-bounded, versioned frame (frame.go). Nothing a
// peer sends can make a member hang or panic: each connection's handshake
// has its own deadline (Config.Handshake), the whole rendezvous has one
// (Config.Timeout), and wrong tokens, garbage, oversize frames, early
// disconnects and silent peers end in an error that names the peer. A
// connection that fails before it authenticates is a stranger: member 0
// refuses it and keeps waiting for the real members (the error at the
// deadline lists the strangers refused); one that authenticates and then
// disagrees (another member count, a member index taken twice) ends the
// rendezvous for everyone, since a member with the token is misconfigured
// rather than hostile. docs/distributed.md has the protocol and its
// reasons.
//
// The package is standard library only: produced programs link it.
package rendezvous

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultHandshake bounds one connection's handshake when
// Config.Handshake is 0: a peer that connects and says nothing is dropped
// after it, so a stranger cannot hold member 0 up.
const DefaultHandshake = 10 * time.Second

// Member is what one member tells the others about itself.
type Member struct {
	// Host names the machine, for messages ("rank 5 on gpu-node-2").
	Host string
	// GPUs is how many GPUs (NCCL ranks) the member drives, 1 or more.
	GPUs int
	// FirstRank is the NCCL rank of its first GPU: the sum of the GPUs of
	// the members before it. Join fills it in.
	FirstRank int
}

// Group is a finished rendezvous: every member, in member order, and
// member 0's payload. Its connections stay open for the run as the
// control channel (control.go: heartbeats, failures, the end); Close
// closes them.
type Group struct {
	Config  Config
	Members []Member
	Payload []byte
	peers   []*peer
	control control
}

// peer is one authenticated connection: member 0 holds one per member,
// a member one to member 0.
type peer struct {
	conn           net.Conn
	member         int
	nonceC, nonceS []byte
	wmu            sync.Mutex  // one frame written at a time
	done           atomic.Bool // it said it finished: its end is no failure
}

// Ranks is the number of NCCL ranks: every member's GPUs together.
func (g *Group) Ranks() int {
	last := g.Members[len(g.Members)-1]
	return last.FirstRank + last.GPUs
}

// Self is this process's entry.
func (g *Group) Self() Member { return g.Members[g.Config.Member] }

// Close closes the connections between the members.
func (g *Group) Close() error {
	g.control.closing.Store(true)
	g.stopBeats()
	var errs []error
	for _, p := range g.peers {
		if err := p.conn.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// LocalMember is this machine as a member: its host name and gpus GPUs.
func LocalMember(gpus int) Member {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return Member{Host: host, GPUs: gpus}
}

// Join runs the rendezvous of cfg for this member (self): member 0 listens
// on cfg.Addr's port on every interface and hands out payload; the others
// connect to cfg.Addr, retrying until member 0 is up. It returns when
// every member has joined, or with an error naming the peer at fault, by
// cfg.Timeout.
func Join(ctx context.Context, cfg Config, self Member, payload []byte) (*Group, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.Member != 0 {
		return Dial(ctx, cfg, self)
	}
	_, port, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("rendezvous: %q: %v", cfg.Addr, err)
	}
	ln, err := net.Listen("tcp", ":"+port)
	if err != nil {
		return nil, fmt.Errorf("rendezvous: member 0 cannot listen on port %s: %v (is another run using it?)", port, err)
	}
	defer ln.Close()
	return Serve(ctx, ln, cfg, self, payload)
}

func (c Config) total() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultTimeout
}

func (c Config) handshake() time.Duration {
	if c.Handshake > 0 {
		return c.Handshake
	}
	return DefaultHandshake
}

// Labels of the three MACs, so that one can never stand for another.
const (
	labelServer  = "mlbuild rendezvous v1: member 0 knows the token"
	labelJoin    = "mlbuild rendezvous v1: join"
	labelWelcome = "mlbuild rendezvous v1: welcome"
)

// mac is HMAC-SHA256 keyed by the token over label and the parts.
func mac(token, label string, parts ...[]byte) []byte {
	h := hmac.New(sha256.New, []byte(token))
	h.Write([]byte(label))
	for _, p := range parts {
		h.Write(p)
	}
	return h.Sum(nil)
}

func nonce() []byte {
	b := make([]byte, nonceSize)
	if _, err := rand.Read(b); err != nil {
		panic("rendezvous: the system's random source failed: " + err.Error()) // crypto/rand never fails on supported systems
	}
	return b
}

// refusal is the body of a refuse frame.
func refusal(reason string) []byte {
	if len(reason) > maxReason {
		reason = reason[:maxReason]
	}
	var e encoder
	e.str(reason)
	return e.b
}

func readRefusal(body []byte) string {
	d := decoder{b: body}
	s := d.str(maxReason)
	if d.end() != nil {
		return "(an unreadable reason)"
	}
	return s
}

// joinBody encodes a join's fields (its MAC follows).
func joinBody(member, members int, self Member) []byte {
	var e encoder
	e.u32(Version)
	e.u32(uint32(member))
	e.u32(uint32(members))
	e.str(self.Host)
	e.u32(uint32(self.GPUs))
	return e.b
}

// welcomeBody encodes every member and the payload.
func welcomeBody(members []Member, payload []byte) []byte {
	var e encoder
	e.u32(uint32(len(members)))
	for _, m := range members {
		e.u32(uint32(m.GPUs))
		e.str(m.Host)
	}
	e.u32(uint32(len(payload)))
	e.bytes(payload)
	return e.b
}

// checkSelf refuses a Member that cannot be sent.
func checkSelf(self Member) error {
	if self.GPUs < 1 {
		return fmt.Errorf("rendezvous: this member reports %d GPUs; it needs 1 or more", self.GPUs)
	}
	if len(self.Host) > MaxHost || self.Host == "" {
		return fmt.Errorf("rendezvous: host name %q: want 1 to %d bytes", self.Host, MaxHost)
	}
	return nil
}

// joined is one member that member 0 has authenticated.
type joined struct {
	conn           net.Conn
	member         int
	info           Member
	nonceC, nonceS []byte
}

// attempt is the outcome of one connection at member 0.
type attempt struct {
	ok     *joined
	remote string
	err    error
	fatal  bool // the peer knew the token: end the rendezvous
}

// Serve runs member 0's side of the rendezvous on ln (Join listens; tests
// pass their own listener). It does not close ln.
func Serve(ctx context.Context, ln net.Listener, cfg Config, self Member, payload []byte) (*Group, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if err := checkSelf(self); err != nil {
		return nil, err
	}
	if len(payload) > MaxPayload {
		return nil, fmt.Errorf("rendezvous: a payload of %d bytes exceeds %d", len(payload), MaxPayload)
	}
	if cfg.Members > MaxMembers {
		return nil, fmt.Errorf("rendezvous: %d members exceed %d", cfg.Members, MaxMembers)
	}
	deadline := time.Now().Add(cfg.total())
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()

	attempts := make(chan attempt)
	// inflight are the connections still in their handshake; when Serve
	// returns it closes them and waits for their goroutines, and the
	// accept loop starts no more.
	var (
		mu       sync.Mutex
		inflight = map[net.Conn]bool{}
		done     bool
		wg       sync.WaitGroup
	)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() && ctx.Err() == nil {
					continue
				}
				return // ln closed, or Serve returned
			}
			mu.Lock()
			if done {
				mu.Unlock()
				conn.Close()
				return
			}
			inflight[conn] = true
			wg.Add(1)
			mu.Unlock()
			go func() {
				defer wg.Done()
				a := serveHandshake(conn, cfg)
				mu.Lock()
				delete(inflight, conn)
				mu.Unlock()
				select {
				case attempts <- a:
				case <-ctx.Done():
					conn.Close()
				}
			}()
		}
	}()
	defer func() {
		mu.Lock()
		done = true
		for c := range inflight {
			c.Close()
		}
		mu.Unlock()
		cancel()
		wg.Wait()
		// Wake the accept loop (a TCP listener's deadline); it then sees
		// done, or the caller's Close of ln ends it.
		if dl, ok := ln.(interface{ SetDeadline(time.Time) error }); ok {
			dl.SetDeadline(time.Now())
		}
	}()

	byMember := make([]*joined, cfg.Members)
	var refused []string
	var conns []net.Conn
	fail := func(err error) (*Group, error) {
		for _, c := range conns {
			writeFrame(c, msgRefuse, refusal(err.Error()))
			c.Close()
		}
		return nil, err
	}
	for have := 1; have < cfg.Members; {
		select {
		case <-ctx.Done():
			var missing []string
			for m := 1; m < cfg.Members; m++ {
				if byMember[m] == nil {
					missing = append(missing, fmt.Sprint(m))
				}
			}
			msg := fmt.Sprintf("rendezvous: member 0 waited %v on %s, and members %s of %d never joined", cfg.total(), ln.Addr(), strings.Join(missing, ", "), cfg.Members)
			if ctx.Err() == context.Canceled {
				msg = fmt.Sprintf("rendezvous: cancelled while members %s of %d had not joined", strings.Join(missing, ", "), cfg.Members)
			}
			if len(refused) > 0 {
				msg += fmt.Sprintf("; refused %d connection(s): %s", len(refused), strings.Join(refused, "; "))
			}
			return fail(errors.New(msg))
		case a := <-attempts:
			if a.ok == nil {
				err := fmt.Errorf("rendezvous: member 0 refused %s: %w", a.remote, a.err)
				if a.fatal {
					return fail(err)
				}
				refused = append(refused, fmt.Sprintf("%s: %v", a.remote, a.err))
				continue
			}
			j := a.ok
			conns = append(conns, j.conn)
			if prev := byMember[j.member]; prev != nil {
				return fail(fmt.Errorf("rendezvous: member %d joined twice, as %s from %s and as %s from %s: give every node its own --node-rank (RANK)",
					j.member, prev.info.Host, prev.conn.RemoteAddr(), j.info.Host, j.conn.RemoteAddr()))
			}
			byMember[j.member] = j
			have++
		}
	}

	members := make([]Member, cfg.Members)
	members[0] = self
	for m := 1; m < cfg.Members; m++ {
		members[m] = byMember[m].info
	}
	first := 0
	for i := range members {
		members[i].FirstRank = first
		first += members[i].GPUs
	}
	body := welcomeBody(members, payload)
	for m := 1; m < cfg.Members; m++ {
		j := byMember[m]
		j.conn.SetWriteDeadline(time.Now().Add(cfg.handshake()))
		msg := append(slices.Clone(body), mac(cfg.Token, labelWelcome, j.nonceC, j.nonceS, body)...)
		if err := writeFrame(j.conn, msgWelcome, msg); err != nil {
			return fail(fmt.Errorf("rendezvous: member %d (%s at %s) left before it was welcomed: %v", m, j.info.Host, j.conn.RemoteAddr(), err))
		}
		j.conn.SetDeadline(time.Time{})
	}
	var peers []*peer
	for m := 1; m < cfg.Members; m++ {
		j := byMember[m]
		peers = append(peers, &peer{conn: j.conn, member: m, nonceC: j.nonceC, nonceS: j.nonceS})
	}
	return newGroup(cfg, members, slices.Clone(payload), peers), nil
}

// serveHandshake authenticates one connection at member 0.
func serveHandshake(conn net.Conn, cfg Config) attempt {
	remote := conn.RemoteAddr().String()
	conn.SetDeadline(time.Now().Add(cfg.handshake()))
	stranger := func(err error) attempt {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("it disconnected during the handshake (%v)", err)
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			err = fmt.Errorf("it sent nothing valid within %v", cfg.handshake())
		}
		conn.Close()
		return attempt{remote: remote, err: err}
	}
	_, body, err := readFrame(conn, msgHello)
	if err != nil {
		return stranger(err)
	}
	if len(body) != nonceSize {
		return stranger(fmt.Errorf("%w: a hello of %d bytes, want %d", errGarbage, len(body), nonceSize))
	}
	nonceC := body
	nonceS := nonce()
	if err := writeFrame(conn, msgChallenge, append(slices.Clone(nonceS), mac(cfg.Token, labelServer, nonceC, nonceS)...)); err != nil {
		return stranger(err)
	}
	t, body, err := readFrame(conn, msgJoin)
	if err != nil {
		return stranger(err)
	}
	if t == msgRefuse {
		return stranger(fmt.Errorf("it gave up: %s", readRefusal(body)))
	}
	if len(body) < macSize {
		return stranger(fmt.Errorf("%w: a join of %d bytes", errGarbage, len(body)))
	}
	fields, sum := body[:len(body)-macSize], body[len(body)-macSize:]
	if !hmac.Equal(sum, mac(cfg.Token, labelJoin, nonceC, nonceS, fields)) {
		writeFrame(conn, msgRefuse, refusal("authentication failed: this node's rendezvous token is not member 0's"))
		return stranger(errors.New("wrong token (authentication failed)"))
	}
	// From here the peer knows the token: a disagreement is a
	// misconfigured member, and fatal.
	d := decoder{b: fields}
	version, member, members := d.u32(), int(d.u32()), int(d.u32())
	info := Member{Host: d.str(MaxHost)}
	info.GPUs = int(d.u32())
	fatal := func(err error) attempt {
		writeFrame(conn, msgRefuse, refusal(err.Error()))
		conn.Close()
		return attempt{remote: remote, err: err, fatal: true}
	}
	if err := d.end(); err != nil {
		return fatal(err)
	}
	who := fmt.Sprintf("member %d (%s)", member, info.Host)
	switch {
	case version != Version:
		return fatal(fmt.Errorf("%s speaks protocol %d, member 0 speaks %d", who, version, Version))
	case members != cfg.Members:
		return fatal(fmt.Errorf("%s was started for %d nodes, member 0 for %d: give every node the same --nodes (WORLD_SIZE)", who, members, cfg.Members))
	case member < 1 || member >= cfg.Members:
		return fatal(fmt.Errorf("%s: its node rank is out of range 1 to %d (0 is member 0's)", who, cfg.Members-1))
	case info.GPUs < 1 || info.GPUs > 1<<16:
		return fatal(fmt.Errorf("%s reports %d GPUs", who, info.GPUs))
	case info.Host == "":
		return fatal(fmt.Errorf("member %d reports no host name", member))
	}
	return attempt{ok: &joined{conn: conn, member: member, info: info, nonceC: nonceC, nonceS: nonceS}, remote: remote}
}

// Dial runs a member's side of the rendezvous: it connects to member 0 at
// cfg.Addr, retrying until it answers or cfg.Timeout passes, then proves
// the token, checks member 0's proof, and waits for the welcome.
func Dial(ctx context.Context, cfg Config, self Member) (*Group, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if err := checkSelf(self); err != nil {
		return nil, err
	}
	if cfg.Member == 0 {
		return nil, fmt.Errorf("%w: member 0 serves, it does not dial", errConfig)
	}
	deadline := time.Now().Add(cfg.total())
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	where := "member 0 at " + cfg.Addr
	var dialer net.Dialer
	var conn net.Conn
	var lastErr error
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		c, err := dialer.DialContext(ctx, "tcp", cfg.Addr)
		if err == nil {
			conn = c
			break
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("rendezvous: member %d could not reach %s within %v: %v (is member 0 started, and the port open?)", cfg.Member, where, cfg.total(), lastErr)
		case <-time.After(wait):
		}
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	g, err := dialHandshake(conn, cfg, self, deadline)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("rendezvous: member %d: %s: %w", cfg.Member, where, err)
	}
	return g, nil
}

// dialHandshake is a member's handshake on a connection to member 0.
func dialHandshake(conn net.Conn, cfg Config, self Member, deadline time.Time) (*Group, error) {
	hs := time.Now().Add(cfg.handshake())
	if hs.After(deadline) {
		hs = deadline
	}
	conn.SetDeadline(hs)
	explain := func(err error, waiting string) error {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("it closed the connection while this member waited for %s", waiting)
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return fmt.Errorf("it did not send %s in time", waiting)
		}
		return err
	}
	nonceC := nonce()
	if err := writeFrame(conn, msgHello, nonceC); err != nil {
		return nil, explain(err, "the challenge")
	}
	t, body, err := readFrame(conn, msgChallenge)
	if err != nil {
		return nil, explain(err, "the challenge")
	}
	if t == msgRefuse {
		return nil, fmt.Errorf("it refused this member: %s", readRefusal(body))
	}
	if len(body) != nonceSize+macSize {
		return nil, fmt.Errorf("%w: a challenge of %d bytes, want %d", errGarbage, len(body), nonceSize+macSize)
	}
	nonceS, proof := body[:nonceSize], body[nonceSize:]
	if !hmac.Equal(proof, mac(cfg.Token, labelServer, nonceC, nonceS)) {
		writeFrame(conn, msgRefuse, refusal("authentication failed: member 0's proof does not match this node's token"))
		return nil, errors.New("it failed to prove it knows the token: the tokens differ, or this is not member 0")
	}
	fields := joinBody(cfg.Member, cfg.Members, self)
	if err := writeFrame(conn, msgJoin, append(fields, mac(cfg.Token, labelJoin, nonceC, nonceS, fields)...)); err != nil {
		return nil, explain(err, "the welcome")
	}
	// Member 0 answers when every member has joined: wait up to the
	// rendezvous deadline, not the handshake's.
	conn.SetDeadline(deadline)
	t, body, err = readFrame(conn, msgWelcome)
	if err != nil {
		return nil, explain(err, "the welcome (every member joined)")
	}
	if t == msgRefuse {
		return nil, fmt.Errorf("it ended the rendezvous: %s", readRefusal(body))
	}
	if len(body) < macSize {
		return nil, fmt.Errorf("%w: a welcome of %d bytes", errGarbage, len(body))
	}
	fields, sum := body[:len(body)-macSize], body[len(body)-macSize:]
	if !hmac.Equal(sum, mac(cfg.Token, labelWelcome, nonceC, nonceS, fields)) {
		return nil, errors.New("its welcome is not authenticated by the token: the connection was tampered with")
	}
	d := decoder{b: fields}
	n := int(d.u32())
	if n != cfg.Members {
		return nil, fmt.Errorf("its welcome lists %d members, this member was started for %d", n, cfg.Members)
	}
	members := make([]Member, n)
	first := 0
	for i := range members {
		members[i].GPUs = int(d.u32())
		members[i].Host = d.str(MaxHost)
		members[i].FirstRank = first
		first += members[i].GPUs
	}
	payload := d.take(int(min(d.u32(), MaxPayload+1)))
	if err := d.end(); err != nil {
		return nil, fmt.Errorf("its welcome: %w", err)
	}
	if me := members[cfg.Member]; me.Host != self.Host || me.GPUs != self.GPUs {
		return nil, fmt.Errorf("its welcome lists this member as %s with %d GPUs, not %s with %d", me.Host, me.GPUs, self.Host, self.GPUs)
	}
	conn.SetDeadline(time.Time{})
	return newGroup(cfg, members, slices.Clone(payload), []*peer{{conn: conn, member: 0, nonceC: nonceC, nonceS: slices.Clone(nonceS)}}), nil
}
