package gpuhost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mlbuild/mlbuild/rt/app"
	"github.com/mlbuild/mlbuild/rt/rendezvous"
)

// A run of several processes (`train --nodes N --node-rank I --rendezvous
// HOST:PORT`, or torchrun's WORLD_SIZE, RANK, LOCAL_RANK, MASTER_ADDR and
// MASTER_PORT): each process is a member with its GPUs, and together they
// train as one Replicated of every member's GPUs would.
//
//	open this member's GPUs, load NCCL
//	member 0: make the clique's id
//	rendezvous (authenticated by the token): member 0 hands out the id,
//	    every member learns the others' GPUs and so its global ranks
//	start the communicators; watch the control channel
//	train (app.Run) as one Replicated; global rank 0 writes everything
//	a normal end: Done; an error: Fail, so that every other member learns it
//
// The control channel's failure (another member died, hung or failed)
// aborts this member's collectives, so its training ends at the next sum,
// or at once where it waits on one; Member.Grace bounds the rest.

// Member runs one process of a run of several (RunMember); MainReplicated
// fills it from the command line and the environment, tests set the
// fields they vary.
type Member struct {
	// Config is the member's place in the run (rendezvous.ParseConfig).
	Config rendezvous.Config
	// Host names this machine in messages; "" is its host name.
	Host string
	// Open opens the member's GPUs first to first+n−1 (n 0: every one
	// from first) and loads NCCL.
	Open func(first, n int) ([]Device, Clique, error)
	// Program is the program trained.
	Program *Program
	// Listener, when set, is member 0's (a test's port), else it listens
	// on Config.Addr's port.
	Listener net.Listener
	// StartTimeout bounds NCCL's start once the rendezvous is done
	// (DefaultStartTimeout for 0); StepTimeout the wait for one window's
	// sums (StepTimeout for 0).
	StartTimeout, StepTimeout time.Duration
	// Watch times the control channel (rendezvous's defaults: a heartbeat
	// every second, a peer silent 10 s has failed).
	Watch rendezvous.WatchOptions
	// Joined, when set, is called with the finished rendezvous (a test's
	// hook: closing the group stands for the process's death).
	Joined func(*rendezvous.Group)
	// Grace bounds how long training may go on after another member
	// failed before Exit is called (DefaultGrace for 0); Exit is os.Exit
	// when nil.
	Grace time.Duration
	Exit  func(code int)
}

// DefaultStartTimeout bounds NCCL's start of a run of several members.
const DefaultStartTimeout = 2 * time.Minute

// DefaultGrace is how long a member's training may go on after it learnt
// that another member failed: its collectives are aborted at once, so only
// work between two sums (an evaluation) can take this long.
const DefaultGrace = 30 * time.Second

// RunMember runs the train command args as one member of a run of several
// and returns its exit status: 0 when the run ended well everywhere, 2 for
// a command line or program that cannot train this way, 1 for any failure,
// its own or (named) another member's.
func RunMember(mb Member, args []string, stdout, stderr io.Writer) int {
	cfg, p := mb.Config, mb.Program
	who := fmt.Sprintf("node %d of %d", cfg.Member, cfg.Members)
	say := func(format string, a ...any) {
		fmt.Fprintf(stderr, "%s: %s: %s\n", p.Meta.Name, who, fmt.Sprintf(format, a...))
	}
	first, n := 0, cfg.GPUs
	if cfg.LocalRank >= 0 { // torchrun: one process per GPU
		first, n = cfg.LocalRank, 1
	}
	devs, clique, err := mb.Open(first, n)
	if err != nil {
		say("%v", err)
		return 1
	}
	closeDevs := func() {
		for _, d := range devs {
			d.Close()
		}
	}
	var payload []byte
	if cfg.Member == 0 {
		if payload, err = clique.NewID(); err != nil {
			closeDevs()
			say("%v", err)
			return 1
		}
	}
	self := rendezvous.LocalMember(len(devs))
	if mb.Host != "" {
		self.Host = mb.Host
	}
	who = fmt.Sprintf("node %d of %d (%s)", cfg.Member, cfg.Members, self.Host)
	var g *rendezvous.Group
	if mb.Listener != nil && cfg.Member == 0 {
		g, err = rendezvous.Serve(context.Background(), mb.Listener, cfg, self, payload)
	} else {
		g, err = rendezvous.Join(context.Background(), cfg, self, payload)
	}
	if err != nil {
		closeDevs()
		say("%v", err)
		return 1
	}
	defer g.Close()
	if mb.Joined != nil {
		mb.Joined(g)
	}
	total := g.Ranks()
	if _, err := p.ForGPUs(total); err != nil {
		// Every member finds the same: none is at fault.
		g.Done()
		closeDevs()
		say("%d nodes with %d GPUs in all: %v", cfg.Members, total, err)
		return 2
	}
	failures := g.Watch(mb.Watch)
	fail := func(err error) int {
		g.Fail(err)
		say("%v", err)
		return 1
	}
	timeout := mb.StartTimeout
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}
	type started struct {
		colls []Collective
		err   error
	}
	start := make(chan started, 1)
	go func() {
		c, err := clique.Start(g.Payload, g.Self().FirstRank, total, timeout)
		start <- started{c, err}
	}()
	var colls []Collective
	select {
	case s := <-start:
		if s.err != nil {
			closeDevs()
			return fail(s.err)
		}
		colls = s.colls
	case err := <-failures:
		// NCCL's start waits for the member that failed; its threads stay
		// blocked, so the devices stay open until the process exits.
		say("%v", err)
		return 1
	}
	step := mb.StepTimeout
	if step <= 0 {
		step = StepTimeout
	}
	r, err := NewReplicated(devs, colls, p, step)
	if err != nil {
		for _, c := range colls {
			c.Close()
		}
		closeDevs()
		return fail(err)
	}
	m := &memberModel{Replicated: r}
	// This member's own failure (a GPU fault, not an abort or a failure
	// NCCL saw elsewhere) goes to the others at once, before the app's
	// error ends the run, so they name it rather than their echo of it.
	var (
		tell sync.Once
		told atomic.Bool
	)
	r.onAbort = func(err error) {
		var me *rendezvous.MemberError
		if errors.As(err, &me) || errors.Is(err, ErrAborted) || errors.Is(err, ErrPeerFailed) || errors.Is(err, ErrCollectiveTimeout) {
			return
		}
		tell.Do(func() { told.Store(true); g.Fail(err) })
	}
	// The control channel's failure aborts every collective of this
	// member, so training ends at its next sum, naming the member at fault;
	// past the grace, the process ends anyway.
	var (
		mu        sync.Mutex
		peer      error
		peerKnown = make(chan struct{})
		ended     = make(chan struct{})
		exited    = make(chan struct{})
	)
	go func() {
		defer close(exited)
		select {
		case err, ok := <-failures:
			var me *rendezvous.MemberError
			if !ok || errors.As(err, &me) && me.Member == cfg.Member {
				return // this member's own failure, told to the others
			}
			mu.Lock()
			peer = err
			mu.Unlock()
			close(peerKnown)
			r.abort(err)
			grace := mb.Grace
			if grace <= 0 {
				grace = DefaultGrace
			}
			select {
			case <-ended:
			case <-time.After(grace):
				say("%v; training did not stop within %v of it, so the process ends here", err, grace)
				if mb.Exit != nil {
					mb.Exit(1)
				} else {
					os.Exit(1)
				}
			}
		case <-ended:
		}
	}()
	if !quiet(args) {
		B := p.Meta.Batch
		fmt.Fprintf(stdout, "%s: GPUs as ranks %d to %d; training on %d GPUs of %d nodes: global batch %d = %d × %d\n",
			who, r.first, r.first+len(r.ranks)-1, total, cfg.Members, B, total, B/total)
	}
	tail := &lastLine{}
	code := app.Run(m, args, stdout, io.MultiWriter(stderr, tail))
	if code != 0 && !told.Load() {
		// A failure here is often the echo of another member's (NCCL saw
		// its peer go): give the control channel a moment to name it.
		select {
		case <-peerKnown:
		case <-time.After(settle):
		}
	}
	mu.Lock()
	failed := peer
	mu.Unlock()
	// Still under the grace: closing waits for the GPUs, which a peer's
	// death may have left in a sum that only the abort ends.
	if err := r.Close(); err != nil && code == 0 && failed == nil {
		say("%v", err)
		code = 1
	}
	close(ended)
	switch {
	case code == 0 && failed == nil:
		g.Done() // a peer that finished first has closed its end: no matter
	case failed != nil:
		if code == 0 {
			code = 1
		}
		// The app's message names the failure where a sum was aborted;
		// say it again in one line for a log that shows only the end.
		say("stopped: %v", failed)
	default:
		g.Fail(fmt.Errorf("exit status %d: %s", code, tail.String()))
	}
	<-exited
	return code
}

// memberModel is the Replicated of one member: only global rank 0 writes
// the run's files (app.OutputWriter).
type memberModel struct{ *Replicated }

// WritesOutputs says whether this member holds global rank 0.
func (m *memberModel) WritesOutputs() bool { return m.first == 0 }

// settle is how long a member whose training failed waits for the control
// channel to name another member as the cause, before it reports itself.
const settle = 2 * time.Second

// quiet says whether a command line asks for the summary alone.
func quiet(args []string) bool {
	for _, a := range args {
		if a == "--quiet" || a == "-quiet" || a == "--quiet=true" || a == "-quiet=true" {
			return true
		}
	}
	return false
}

// lastLine keeps the last line written to it, for the reason a member
// sends the others when its training fails.
type lastLine struct {
	mu   sync.Mutex
	buf  []byte
	last string
}

func (l *lastLine) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, b...)
	for {
		i := strings.IndexByte(string(l.buf), '\n')
		if i < 0 {
			break
		}
		if line := strings.TrimSpace(string(l.buf[:i])); line != "" {
			l.last = line
		}
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) > 4096 {
		l.buf = l.buf[len(l.buf)-4096:]
	}
	return len(b), nil
}

func (l *lastLine) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.last
	if t := strings.TrimSpace(string(l.buf)); t != "" {
		s = t
	}
	if len(s) > 900 {
		s = s[:900] + "…"
	}
	if s == "" {
		return "no message"
	}
	return s
}

// DistributedConfig is the rendezvous.Config of a train command line and
// the environment (getenv), for MainReplicated and tests. Under torchrun
// (TORCHELASTIC_RUN_ID set) its agent's own store already listens on
// MASTER_PORT of the first node, so without --rendezvous the rendezvous
// takes the port after it, on every member alike.
func DistributedConfig(args []string, getenv func(string) string) (rendezvous.Config, error) {
	f := rendezvous.Flags{
		GPUs: app.TrainFlagOf(args, "gpus"), Nodes: app.TrainFlagOf(args, "nodes"), NodeRank: app.TrainFlagOf(args, "node-rank"),
		Rendezvous: app.TrainFlagOf(args, "rendezvous"), Token: app.TrainFlagOf(args, "rendezvous-token"), Timeout: app.TrainFlagOf(args, "rendezvous-timeout"),
	}
	if _, err := app.GPUsOf(args); err != nil {
		return rendezvous.Config{}, err
	}
	cfg, err := rendezvous.ParseConfig(f, getenv)
	if err != nil || cfg.Members < 2 || f.Rendezvous != "" || getenv("TORCHELASTIC_RUN_ID") == "" {
		return cfg, err
	}
	host, port, _ := net.SplitHostPort(cfg.Addr) // ParseConfig checked it
	p, _ := strconv.Atoi(port)
	if p == 65535 {
		return cfg, fmt.Errorf("MASTER_PORT=%d: under torchrun the rendezvous takes the port after MASTER_PORT, and there is none; choose another --master-port", p)
	}
	cfg.Addr = net.JoinHostPort(host, strconv.Itoa(p+1))
	return cfg, nil
}
