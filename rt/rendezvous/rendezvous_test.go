package rendezvous

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// listen opens member 0's listener on a free loopback port.
func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func config(ln net.Listener, members, member int) Config {
	return Config{Members: members, Member: member, Addr: ln.Addr().String(), Token: goodToken,
		Timeout: 20 * time.Second, Handshake: 5 * time.Second}
}

type result struct {
	g   *Group
	err error
}

// start runs member 0's Serve in the background.
func start(ln net.Listener, cfg Config, payload []byte) <-chan result {
	out := make(chan result, 1)
	go func() {
		g, err := Serve(context.Background(), ln, cfg, Member{Host: "host0", GPUs: 2}, payload)
		out <- result{g, err}
	}()
	return out
}

// dial runs member m's Dial in the background.
func dial(cfg Config, host string, gpus int) <-chan result {
	out := make(chan result, 1)
	go func() {
		g, err := Dial(context.Background(), cfg, Member{Host: host, GPUs: gpus})
		out <- result{g, err}
	}()
	return out
}

// hangGuard is how long a test waits for an answer before it calls the
// code under test hung: far past every timeout the tests set, since a
// loaded CI machine can be seconds late.
const hangGuard = 30 * time.Second

// slack is what the timing checks allow past a stated timeout.
const slack = 5 * time.Second

// wait takes a result, failing the test when none comes within limit:
// every failure must come by its stated timeout.
func wait(t *testing.T, ch <-chan result, limit time.Duration, who string) result {
	t.Helper()
	select {
	case r := <-ch:
		if r.g != nil {
			t.Cleanup(func() { r.g.Close() })
		}
		return r
	case <-time.After(limit):
		t.Fatalf("%s gave no answer within %v", who, limit)
		return result{}
	}
}

func wantErr(t *testing.T, r result, who string, parts ...string) {
	t.Helper()
	if r.err == nil {
		t.Fatalf("%s succeeded, want an error containing %q", who, parts)
	}
	for _, p := range parts {
		if !strings.Contains(r.err.Error(), p) {
			t.Errorf("%s: error %q lacks %q", who, r.err, p)
		}
	}
}

func TestThreeMembers(t *testing.T) {
	t.Parallel()
	ln := listen(t)
	id := bytes.Repeat([]byte{0xAB}, 128)
	srv := start(ln, config(ln, 3, 0), id)
	c2 := dial(config(ln, 3, 2), "host2", 4)
	time.Sleep(20 * time.Millisecond) // member 2 first: order must not matter
	c1 := dial(config(ln, 3, 1), "host1", 1)
	want := []Member{{"host0", 2, 0}, {"host1", 1, 2}, {"host2", 4, 3}}
	for i, ch := range []<-chan result{srv, c1, c2} {
		r := wait(t, ch, hangGuard, fmt.Sprint("member ", i))
		if r.err != nil {
			t.Fatalf("member %d: %v", i, r.err)
		}
		if fmt.Sprint(r.g.Members) != fmt.Sprint(want) || !bytes.Equal(r.g.Payload, id) || r.g.Ranks() != 7 {
			t.Errorf("member %d: members %v payload %x ranks %d; want %v, the id, 7", i, r.g.Members, r.g.Payload[:4], r.g.Ranks(), want)
		}
		if r.g.Self() != want[i] {
			t.Errorf("member %d: Self %v", i, r.g.Self())
		}
	}
}

// TestMemberStartsFirst: a member started before member 0 retries until
// it listens.
func TestMemberStartsFirst(t *testing.T) {
	t.Parallel()
	ln := listen(t)
	addr := ln.Addr().String()
	ln.Close()
	cfg := Config{Members: 2, Member: 1, Addr: addr, Token: goodToken, Timeout: 20 * time.Second}
	c := dial(cfg, "host1", 1)
	time.Sleep(300 * time.Millisecond)
	ln2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the port was taken meanwhile: %v", err) // not a pass: reported as a skip
	}
	defer ln2.Close()
	srv := start(ln2, config(ln2, 2, 0), nil)
	for i, ch := range []<-chan result{srv, c} {
		if r := wait(t, ch, hangGuard, fmt.Sprint("member ", i)); r.err != nil {
			t.Fatalf("member %d: %v", i, r.err)
		}
	}
}

func TestWrongTokenIsRefusedAndTheRealMemberStillJoins(t *testing.T) {
	t.Parallel()
	ln := listen(t)
	srv := start(ln, config(ln, 2, 0), []byte("id"))
	bad := config(ln, 2, 1)
	bad.Token = strings.Repeat("z", 20)
	r := wait(t, dial(bad, "intruder", 1), hangGuard, "the member with the wrong token")
	wantErr(t, r, "the member with the wrong token", "member 1", ln.Addr().String(), "failed to prove it knows the token")
	r = wait(t, dial(config(ln, 2, 1), "host1", 1), hangGuard, "member 1")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r := wait(t, srv, hangGuard, "member 0"); r.err != nil {
		t.Fatal(r.err)
	}
}

// TestTimeoutNamesMissingMembersAndStrangers: member 0 gives up at its
// deadline, naming who never came and whom it refused.
func TestTimeoutNamesMissingMembersAndStrangers(t *testing.T) {
	t.Parallel()
	ln := listen(t)
	cfg := config(ln, 3, 0)
	cfg.Timeout = 2 * time.Second
	srv := start(ln, cfg, nil)
	// A stranger that knows the protocol but not the token: it answers the
	// challenge with a made-up MAC.
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	writeFrame(conn, msgHello, make([]byte, nonceSize))
	if _, _, err := readFrame(conn, msgChallenge); err != nil {
		t.Fatal(err)
	}
	writeFrame(conn, msgJoin, append(joinBody(1, 3, Member{Host: "evil", GPUs: 1}), make([]byte, macSize)...))
	if typ, body, err := readFrame(conn, msgWelcome); err != nil || typ != msgRefuse || !strings.Contains(readRefusal(body), "authentication failed") {
		t.Errorf("the stranger got %v %q %v, want a refusal", typ, body, err)
	}
	start := time.Now()
	r := wait(t, srv, hangGuard, "member 0")
	wantErr(t, r, "member 0", "members 1, 2 of 3 never joined", "refused 1 connection(s)", "wrong token")
	if d := time.Since(start); d > 2*time.Second+slack {
		t.Errorf("member 0 answered after %v, its timeout is 2s", d)
	}
}

// TestMisconfiguredMemberEndsTheRendezvous: a member that knows the token
// but disagrees ends it for everyone, each naming the peer.
func TestMisconfiguredMemberEndsTheRendezvous(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name        string
		second      func(Config) Config
		srv, member []string
	}{
		{"wrong world size", func(c Config) Config { c.Members = 4; c.Member = 2; return c },
			[]string{"member 2 (host2) was started for 4 nodes, member 0 for 3"},
			[]string{"it ended the rendezvous", "member 2 (host2) was started for 4 nodes"}},
		{"duplicate rank", func(c Config) Config { return c },
			[]string{"member 1 joined twice, as host1 from", "and as host2 from"},
			[]string{"member 1 joined twice"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ln := listen(t)
			srv := start(ln, config(ln, 3, 0), nil)
			first := dial(config(ln, 3, 1), "host1", 1)
			time.Sleep(50 * time.Millisecond)
			second := dial(c.second(config(ln, 3, 1)), "host2", 1)
			wantErr(t, wait(t, srv, hangGuard, "member 0"), "member 0", c.srv...)
			wantErr(t, wait(t, first, hangGuard, "member 1"), "member 1", append([]string{"it ended the rendezvous"}, c.member[len(c.member)-1])...)
			wantErr(t, wait(t, second, hangGuard, "the second member"), "the second member", c.member...)
		})
	}
}

// TestHostileBytes: garbage, oversize frames, another version, early
// disconnects and silence are refused within the handshake timeout and
// never stop the real member from joining.
func TestHostileBytes(t *testing.T) {
	t.Parallel()
	header := func(version, typ byte, n uint32) []byte {
		h := []byte(frameMagic)
		h = append(h, version, typ)
		return binary.BigEndian.AppendUint32(h, n)
	}
	for _, c := range []struct {
		name  string
		send  []byte
		close bool
		why   string
	}{
		{"garbage", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), false, `not an mlbuild rendezvous message: it begins "GET "`},
		{"oversize frame", header(Version, byte(msgHello), 1<<30), false, "a hello frame of 1073741824 bytes, over its bound of 32"},
		{"another version", header(9, byte(msgHello), 32), false, "protocol version 9, this mlbuild speaks 1"},
		{"wrong message first", header(Version, byte(msgWelcome), 10), false, "a welcome frame where a hello was expected"},
		{"short hello", append(header(Version, byte(msgHello), 3), 1, 2, 3), false, "a hello of 3 bytes, want 32"},
		{"early disconnect", header(Version, byte(msgHello), 32)[:6], true, "it disconnected during the handshake"},
		{"silence", nil, false, "it sent nothing valid within 2s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ln := listen(t)
			cfg := config(ln, 2, 0)
			cfg.Timeout, cfg.Handshake = 4*time.Second, 2*time.Second
			srv := start(ln, cfg, nil)
			conn, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.Write(c.send)
			if c.close {
				conn.Close()
			}
			// Nobody else comes: member 0's timeout lists the refusal.
			wantErr(t, wait(t, srv, hangGuard, "member 0"), "member 0", "members 1 of 2 never joined", c.why)
		})
	}
	t.Run("the real member joins meanwhile", func(t *testing.T) {
		ln := listen(t)
		srv := start(ln, config(ln, 2, 0), nil)
		var conns []net.Conn
		for _, b := range [][]byte{[]byte("garbage!!!!!!"), header(Version, byte(msgHello), 1<<30), nil} {
			conn, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.Write(b)
			conns = append(conns, conn)
		}
		if r := wait(t, dial(config(ln, 2, 1), "host1", 1), hangGuard, "member 1"); r.err != nil {
			t.Fatal(r.err)
		}
		if r := wait(t, srv, hangGuard, "member 0"); r.err != nil {
			t.Fatal(r.err)
		}
	})
}

// fakeServer accepts one connection and runs serve on it.
func fakeServer(t *testing.T, serve func(net.Conn)) Config {
	t.Helper()
	ln := listen(t)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		serve(conn)
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return config(ln, 2, 1)
}

// TestHostileMemberZero: a member facing a silent, lying, disconnecting or
// babbling member 0 fails within its timeouts with a clear error.
func TestHostileMemberZero(t *testing.T) {
	t.Parallel()
	readHello := func(conn net.Conn) []byte {
		_, b, _ := readFrame(conn, msgHello)
		return b
	}
	for _, c := range []struct {
		name  string
		serve func(net.Conn)
		why   string
	}{
		{"silent", func(conn net.Conn) { io.Copy(io.Discard, conn) }, "it did not send the challenge in time"},
		{"disconnects", func(conn net.Conn) { readHello(conn) }, "it closed the connection while this member waited for the challenge"},
		{"garbage", func(conn net.Conn) {
			readHello(conn)
			conn.Write([]byte("SSH-2.0-OpenSSH_9.6\r\n"))
			io.Copy(io.Discard, conn)
		},
			`not an mlbuild rendezvous message: it begins "SSH-"`},
		{"impostor", func(conn net.Conn) {
			readHello(conn)
			writeFrame(conn, msgChallenge, make([]byte, nonceSize+macSize))
			io.Copy(io.Discard, conn)
		}, "it failed to prove it knows the token"},
		{"forged welcome", func(conn net.Conn) {
			nc := readHello(conn)
			ns := make([]byte, nonceSize)
			writeFrame(conn, msgChallenge, append(ns, mac(goodToken, labelServer, nc, ns)...))
			readFrame(conn, msgJoin)
			body := welcomeBody([]Member{{"host0", 1, 0}, {"host1", 1, 1}}, []byte("evil id"))
			writeFrame(conn, msgWelcome, append(body, make([]byte, macSize)...))
		}, "its welcome is not authenticated by the token"},
		{"never welcomes", func(conn net.Conn) {
			nc := readHello(conn)
			ns := make([]byte, nonceSize)
			writeFrame(conn, msgChallenge, append(ns, mac(goodToken, labelServer, nc, ns)...))
			io.Copy(io.Discard, conn)
		}, "it did not send the welcome (every member joined) in time"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg := fakeServer(t, c.serve)
			cfg.Handshake = time.Second
			if c.name == "never welcomes" {
				cfg.Timeout = 2 * time.Second
			}
			start := time.Now()
			r := wait(t, dial(cfg, "host1", 1), hangGuard, "member 1")
			wantErr(t, r, "member 1", "rendezvous: member 1: member 0 at "+cfg.Addr, c.why)
			if d := time.Since(start); d > 2*time.Second+slack {
				t.Errorf("member 1 answered after %v", d)
			}
		})
	}
}

// TestUnreachable: no member 0 at all is an error by the timeout.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	ln := listen(t)
	cfg := config(ln, 2, 1)
	ln.Close()
	cfg.Timeout = 500 * time.Millisecond
	wantErr(t, wait(t, dial(cfg, "host1", 1), hangGuard, "member 1"), "member 1",
		"member 1 could not reach member 0 at "+cfg.Addr+" within 500ms", "is member 0 started")
}

// FuzzMember feeds arbitrary bytes to a member as member 0's answers: it
// must fail cleanly or, for a valid exchange, succeed; never panic or hang.
func FuzzMember(f *testing.F) {
	f.Add([]byte("MLBR\x01\x02\x00\x00\x00\x40"))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, answer []byte) {
		a, b := net.Pipe()
		defer a.Close()
		go func() {
			defer b.Close()
			readFrame(b, msgHello)
			b.Write(answer)
			io.Copy(io.Discard, b)
		}()
		cfg := Config{Members: 2, Member: 1, Addr: "pipe:1", Token: goodToken, Handshake: 10 * time.Millisecond, Timeout: 20 * time.Millisecond}
		g, err := dialHandshake(a, cfg, Member{Host: "h", GPUs: 1}, time.Now().Add(20*time.Millisecond))
		if err == nil {
			t.Fatalf("a member accepted a welcome without the token: %+v", g)
		}
	})
}

// FuzzMemberZero feeds arbitrary bytes to member 0 as a connecting
// peer's: without the token nothing may join, and nothing may panic or
// hang past the handshake's limit.
func FuzzMemberZero(f *testing.F) {
	var hello bytes.Buffer
	writeFrame(&hello, msgHello, make([]byte, nonceSize))
	f.Add(hello.Bytes())
	f.Add(append(hello.Bytes(), "MLBR\x01\x03\x00\x00\x00\x30"...))
	f.Add([]byte("GET / HTTP/1.0\r\n\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		a, b := net.Pipe()
		defer a.Close()
		go func() {
			defer b.Close()
			go io.Copy(io.Discard, b)
			b.Write(in)
		}()
		cfg := Config{Members: 3, Member: 0, Addr: "pipe:1", Token: goodToken, Handshake: 10 * time.Millisecond}
		if at := serveHandshake(a, cfg); at.ok != nil {
			t.Fatalf("a peer without the token joined as member %d", at.ok.member)
		}
	})
}

// TestJoin: Join listens on the address's port for member 0 and dials
// for the others, and refuses a Config it cannot use.
func TestJoin(t *testing.T) {
	t.Parallel()
	ln := listen(t)
	addr := ln.Addr().String()
	ln.Close() // a free port for Join to listen on
	cfg := Config{Members: 2, Addr: addr, Token: goodToken, Timeout: 20 * time.Second}
	results := make(chan result, 2)
	for m := range 2 {
		go func() {
			c := cfg
			c.Member = m
			g, err := Join(context.Background(), c, Member{Host: fmt.Sprint("host", m), GPUs: 1}, []byte("id"))
			results <- result{g, err}
		}()
	}
	for range 2 {
		r := wait(t, results, hangGuard, "a member")
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.g.Ranks() != 2 || string(r.g.Payload) != "id" {
			t.Errorf("member %d: %d ranks, payload %q", r.g.Config.Member, r.g.Ranks(), r.g.Payload)
		}
	}
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Members: 1, Addr: addr, Token: goodToken}, "1 members; a rendezvous needs 2 or more"},
		{Config{Members: 2, Member: 2, Addr: addr, Token: goodToken}, "member 2 of 2"},
		{Config{Members: 2, Addr: addr, Token: "short"}, "a token of 5 characters"},
		{Config{Members: 2, Token: goodToken}, "no address"},
	} {
		if _, err := Join(context.Background(), c.cfg, Member{Host: "h", GPUs: 1}, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Join(%+v) = %v, want an error containing %q", c.cfg, err, c.want)
		}
	}
	if _, err := Dial(context.Background(), Config{Members: 2, Member: 1, Addr: addr, Token: goodToken}, Member{Host: "h", GPUs: 0}); err == nil || !strings.Contains(err.Error(), "reports 0 GPUs") {
		t.Errorf("Dial with 0 GPUs: %v", err)
	}
}
