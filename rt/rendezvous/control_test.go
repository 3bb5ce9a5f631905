package rendezvous

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// threeGroups runs a rendezvous of three members (host0 with 2 GPUs,
// host1 with 1, host2 with 4) and returns their groups.
func threeGroups(t *testing.T) [3]*Group {
	t.Helper()
	ln := listen(t)
	chans := []<-chan result{start(ln, config(ln, 3, 0), nil), dial(config(ln, 3, 1), "host1", 1), dial(config(ln, 3, 2), "host2", 4)}
	var gs [3]*Group
	for i, ch := range chans {
		r := wait(t, ch, hangGuard, fmt.Sprint("member ", i))
		if r.err != nil {
			t.Fatal(r.err)
		}
		gs[i] = r.g
	}
	return gs
}

var fast = WatchOptions{Interval: 50 * time.Millisecond, Silence: 2 * time.Second}

// failureOf waits for the first failure on ch, within limit.
func failureOf(t *testing.T, ch <-chan error, limit time.Duration, who string) *MemberError {
	t.Helper()
	select {
	case err := <-ch:
		var me *MemberError
		if !errors.As(err, &me) {
			t.Fatalf("%s: %v is not a *MemberError", who, err)
		}
		return me
	case <-time.After(limit):
		t.Fatalf("%s heard of no failure within %v", who, limit)
		return nil
	}
}

func wantMemberError(t *testing.T, e *MemberError, member int, parts ...string) {
	t.Helper()
	if e.Member != member {
		t.Errorf("the failure names node %d, want %d: %v", e.Member, member, e)
	}
	for _, p := range parts {
		if !strings.Contains(e.Error(), p) {
			t.Errorf("failure %q lacks %q", e, p)
		}
	}
}

func TestControlDoneIsNoFailure(t *testing.T) {
	t.Parallel()
	gs := threeGroups(t)
	var chans [3]<-chan error
	for i, g := range gs {
		chans[i] = g.Watch(fast)
	}
	time.Sleep(100 * time.Millisecond) // some heartbeats
	for _, g := range gs {
		if err := g.Done(); err != nil {
			t.Error(err)
		}
	}
	for _, g := range gs {
		g.Close()
	}
	time.Sleep(fast.Silence + 100*time.Millisecond)
	for i, ch := range chans {
		select {
		case err := <-ch:
			t.Errorf("member %d: a failure after every member finished: %v", i, err)
		default:
		}
	}
}

func TestControlHeartbeatsKeepQuietRunsAlive(t *testing.T) {
	t.Parallel()
	gs := threeGroups(t)
	var chans [3]<-chan error
	for i, g := range gs {
		chans[i] = g.Watch(fast)
	}
	time.Sleep(2 * fast.Silence) // nothing but heartbeats, two silences long
	for i, ch := range chans {
		select {
		case err := <-ch:
			t.Errorf("member %d: %v", i, err)
		default:
		}
	}
}

// TestControlMemberDies: a member whose connection ends without done has
// failed; member 0 sees it and tells the others.
func TestControlMemberDies(t *testing.T) {
	t.Parallel()
	gs := threeGroups(t)
	c0, c1 := gs[0].Watch(fast), gs[1].Watch(fast)
	gs[2].peers[0].conn.Close() // the process is gone
	// The reason shows it was the connection's end, not the silence limit.
	for i, ch := range []<-chan error{c0, c1} {
		e := failureOf(t, ch, hangGuard, fmt.Sprint("member ", i))
		wantMemberError(t, e, 2, "node 2 (host2, ranks 3 to 6) failed: its connection closed before it finished")
	}
}

// TestControlMemberDiesWithAReset: a member killed with bytes unread in
// its socket resets the connection (here: lingering 0, as the kernel does
// for such a process); that too is its connection's end, not a fault of
// the network.
func TestControlMemberDiesWithAReset(t *testing.T) {
	t.Parallel()
	gs := threeGroups(t)
	c0 := gs[0].Watch(fast)
	conn := gs[2].peers[0].conn.(*net.TCPConn)
	conn.SetLinger(0)
	conn.Close()
	e := failureOf(t, c0, hangGuard, "member 0")
	wantMemberError(t, e, 2, "node 2 (host2, ranks 3 to 6) failed: its connection closed before it finished")
}

// TestControlMemberHangs: a member that sends nothing for Silence has
// failed.
func TestControlMemberHangs(t *testing.T) {
	t.Parallel()
	gs := threeGroups(t)
	c0, c2 := gs[0].Watch(fast), gs[2].Watch(fast)
	// Member 1 never watches: no heartbeats, as a stuck process.
	start := time.Now()
	for i, ch := range []<-chan error{c0, c2} {
		e := failureOf(t, ch, hangGuard, fmt.Sprint("member ", 2*i))
		wantMemberError(t, e, 1, "node 1 (host1, rank 2) failed: it sent nothing for 2s")
	}
	if d := time.Since(start); d < fast.Silence || d > fast.Silence+slack {
		t.Errorf("a silent member reported after %v, want about %v", d, fast.Silence)
	}
}

// TestControlFailIsRelayed: a member's Fail reaches every member, with
// its reason.
func TestControlFailIsRelayed(t *testing.T) {
	t.Parallel()
	gs := threeGroups(t)
	var chans [3]<-chan error
	for i, g := range gs {
		chans[i] = g.Watch(fast)
	}
	gs[1].Fail(errors.New("epoch 3: CUDA out of memory"))
	for i, ch := range chans {
		e := failureOf(t, ch, hangGuard, fmt.Sprint("member ", i))
		wantMemberError(t, e, 1, "node 1 (host1, rank 2) failed: epoch 3: CUDA out of memory")
	}
}

// TestControlMemberZeroDies: when member 0 goes, every member learns it.
func TestControlMemberZeroDies(t *testing.T) {
	t.Parallel()
	gs := threeGroups(t)
	c1, c2 := gs[1].Watch(fast), gs[2].Watch(fast)
	for _, p := range gs[0].peers {
		p.conn.Close()
	}
	for i, ch := range []<-chan error{c1, c2} {
		wantMemberError(t, failureOf(t, ch, hangGuard, fmt.Sprint("member ", i+1)), 0, "node 0 (host0, ranks 0 to 1) failed: its connection closed")
	}
}

// TestControlGarbage: bytes that are not the protocol on the control
// channel, or a failure the token does not authenticate, are the
// sender's failure.
func TestControlGarbage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		send func(g *Group)
		want string
	}{
		{"garbage", func(g *Group) { g.peers[0].conn.Write([]byte("\x00\x01garbage!")) }, "its connection failed: not an mlbuild rendezvous message"},
		{"forged failure", func(g *Group) {
			body := append(failBody(&MemberError{Member: 2, Host: "host2", Reason: "lies"}), make([]byte, macSize)...)
			writeFrame(g.peers[0].conn, msgFail, body)
		}, "it sent a failure that the token does not authenticate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			gs := threeGroups(t)
			c0 := gs[0].Watch(fast)
			gs[2].Watch(fast)
			c.send(gs[1])
			wantMemberError(t, failureOf(t, c0, hangGuard, "member 0"), 1, c.want)
		})
	}
}
