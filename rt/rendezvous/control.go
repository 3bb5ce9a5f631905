package rendezvous

import (
	"crypto/hmac"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The control channel. After the welcome every member keeps its
// connection to member 0 (member 0 keeps one per member), and Watch runs
// on them for the whole run:
//
//   - both ends send a heartbeat every Interval; a peer silent for Silence,
//     or whose connection ends before it said it was done, has failed;
//   - Fail sends a failure naming this member and why; member 0 relays
//     every failure it learns of to every other member;
//   - Done says this member finished normally, so the end of its
//     connection is no failure.
//
// So the first failure anywhere reaches every member within Silence (a
// process that dies closes its connection at once; a machine that hangs
// stops its heartbeats), as a *MemberError naming the node, its host,
// its NCCL ranks and the cause. A run then aborts its collective
// (gpuhost.Collective.Abort) and exits non-zero, instead of waiting on a
// peer that will never come.

// Defaults of WatchOptions.
const (
	DefaultInterval = time.Second
	DefaultSilence  = 10 * time.Second
)

// WatchOptions time the control channel.
type WatchOptions struct {
	// Interval is the time between heartbeats; 0 is DefaultInterval.
	Interval time.Duration
	// Silence is how long a peer may send nothing before it has failed;
	// 0 is DefaultSilence. It must exceed Interval.
	Silence time.Duration
}

// MemberError is a member's failure, as the control channel reports it.
type MemberError struct {
	Member int    // the node rank
	Host   string // its host
	// FirstRank and Ranks are its NCCL ranks: FirstRank to
	// FirstRank+Ranks−1.
	FirstRank, Ranks int
	Reason           string
}

// Error reads "node 1 (host-b, ranks 4 to 7) failed: REASON".
func (e *MemberError) Error() string {
	ranks := fmt.Sprintf("rank %d", e.FirstRank)
	if e.Ranks > 1 {
		ranks = fmt.Sprintf("ranks %d to %d", e.FirstRank, e.FirstRank+e.Ranks-1)
	}
	return fmt.Sprintf("node %d (%s, %s) failed: %s", e.Member, e.Host, ranks, e.Reason)
}

// control is a Group's control channel state.
type control struct {
	watchOnce sync.Once
	failOnce  sync.Once
	failures  chan error
	closing   atomic.Bool
	stop      chan struct{}
	stopOnce  sync.Once
}

const labelFail, labelDone = "mlbuild rendezvous v1: failure", "mlbuild rendezvous v1: done"

func (g *Group) memberError(m int, reason string) *MemberError {
	e := &MemberError{Member: m, Reason: reason}
	if m >= 0 && m < len(g.Members) {
		e.Host, e.FirstRank, e.Ranks = g.Members[m].Host, g.Members[m].FirstRank, g.Members[m].GPUs
	}
	return e
}

// Watch starts the control channel and returns where its first failure
// arrives (once; nothing arrives when every member finishes). Call it
// once, right after the rendezvous; later calls return the same channel.
func (g *Group) Watch(opts WatchOptions) <-chan error {
	g.control.watchOnce.Do(func() {
		if opts.Interval <= 0 {
			opts.Interval = DefaultInterval
		}
		if opts.Silence <= opts.Interval {
			opts.Silence = max(DefaultSilence, 3*opts.Interval)
		}
		for _, p := range g.peers {
			go g.read(p, opts)
		}
		go g.beat(opts)
	})
	return g.control.failures
}

// newGroup makes a Group with its control state.
func newGroup(cfg Config, members []Member, payload []byte, peers []*peer) *Group {
	g := &Group{Config: cfg, Members: members, Payload: payload, peers: peers}
	g.control.failures = make(chan error, 1)
	g.control.stop = make(chan struct{})
	return g
}

// stopBeats ends the heartbeats.
func (g *Group) stopBeats() { g.control.stopOnce.Do(func() { close(g.control.stop) }) }

// beat sends heartbeats until the group closes.
func (g *Group) beat(opts WatchOptions) {
	t := time.NewTicker(opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-g.control.stop:
			return
		case <-t.C:
			for _, p := range g.peers {
				g.send(p, msgBeat, nil, opts.Interval)
			}
		}
	}
}

// send writes one frame to p, bounded by limit; a frame that cannot be
// written is left to p's reader to report.
func (g *Group) send(p *peer, t msgType, body []byte, limit time.Duration) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.conn.SetWriteDeadline(time.Now().Add(limit))
	return writeFrame(p.conn, t, body)
}

// signed is a failure or done frame's body: fields and their MAC on p's
// connection.
func (g *Group) signed(p *peer, label string, fields []byte) []byte {
	return append(fields, mac(g.Config.Token, label, p.nonceC, p.nonceS, fields)...)
}

// read reads p's frames until the group closes or p fails.
func (g *Group) read(p *peer, opts WatchOptions) {
	for {
		p.conn.SetReadDeadline(time.Now().Add(opts.Silence))
		t, body, err := readFrame(p.conn, msgBeat, msgFail, msgDone)
		if g.control.closing.Load() || p.done.Load() {
			return
		}
		if err != nil {
			var reason string
			switch ne, ok := err.(net.Error); {
			case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET):
				// A process killed with bytes unread in its socket ends the
				// connection with a reset rather than a close.
				reason = "its connection closed before it finished (the process exited or was killed)"
			case ok && ne.Timeout():
				reason = fmt.Sprintf("it sent nothing for %v (the process or its machine hangs, or the network is down)", opts.Silence)
			default:
				reason = fmt.Sprintf("its connection failed: %v", err)
			}
			g.report(g.memberError(p.member, reason))
			return
		}
		if t == msgBeat {
			continue
		}
		if t == msgRefuse {
			g.report(g.memberError(p.member, "it refused the connection: "+readRefusal(body)))
			return
		}
		if len(body) < macSize || !hmac.Equal(body[len(body)-macSize:], mac(g.Config.Token, map[msgType]string{msgFail: labelFail, msgDone: labelDone}[t], p.nonceC, p.nonceS, body[:len(body)-macSize])) {
			g.report(g.memberError(p.member, fmt.Sprintf("it sent a %s that the token does not authenticate", t)))
			return
		}
		d := decoder{b: body[:len(body)-macSize]}
		m := int(d.u32())
		if t == msgDone {
			if d.end() != nil || m != p.member {
				g.report(g.memberError(p.member, "it sent an unreadable done"))
				return
			}
			p.done.Store(true)
			return
		}
		host, reason := d.str(MaxHost), d.str(maxReason)
		if d.end() != nil || m < 0 || m >= g.Config.Members {
			g.report(g.memberError(p.member, "it sent an unreadable failure"))
			return
		}
		e := g.memberError(m, reason)
		if host != e.Host {
			e.Reason += fmt.Sprintf(" (reported from %s)", host)
		}
		g.report(e)
		return
	}
}

// report delivers the first failure locally and, at member 0, relays it
// to every member but the one that failed.
func (g *Group) report(e *MemberError) {
	g.control.failOnce.Do(func() {
		g.control.failures <- e
		if g.Config.Member != 0 {
			return
		}
		for _, p := range g.peers {
			if p.member != e.Member && !p.done.Load() {
				g.send(p, msgFail, g.signed(p, labelFail, failBody(e)), time.Second)
			}
		}
	})
}

func failBody(e *MemberError) []byte {
	var enc encoder
	enc.u32(uint32(e.Member))
	enc.str(e.Host)
	reason := e.Reason
	if len(reason) > maxReason {
		reason = reason[:maxReason]
	}
	enc.str(reason)
	return enc.b
}

// Fail tells every member that this one failed and why (member 0 sends
// it to all, a member to member 0, which relays it), and reports it on
// Watch's channel. Call it before exiting non-zero.
func (g *Group) Fail(reason error) {
	e := g.memberError(g.Config.Member, reason.Error())
	g.control.failOnce.Do(func() {
		g.control.failures <- e
		for _, p := range g.peers {
			if !p.done.Load() {
				g.send(p, msgFail, g.signed(p, labelFail, failBody(e)), time.Second)
			}
		}
	})
}

// Done tells the other end of every connection that this member finished
// normally and stops the heartbeats; Close follows.
func (g *Group) Done() error {
	g.control.closing.Store(true)
	g.stopBeats()
	var enc encoder
	enc.u32(uint32(g.Config.Member))
	var errs []error
	for _, p := range g.peers {
		if err := g.send(p, msgDone, g.signed(p, labelDone, enc.b), time.Second); err != nil {
			errs = append(errs, fmt.Errorf("telling node %d it finished: %w", p.member, err))
		}
	}
	return errors.Join(errs...)
}
