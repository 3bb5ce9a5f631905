package rendezvous

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Config is one process's place in a distributed run: how many processes
// take part (Members), which one this is (Member), how many GPUs it
// drives, where member 0 listens and the shared token. A run of one
// process (Members 1) needs no rendezvous, no token and no NCCL.
type Config struct {
	// Members is how many processes take part: --nodes, or WORLD_SIZE
	// under torchrun (one process per GPU).
	Members int
	// Member is this process's index, 0 to Members−1: --node-rank, or RANK.
	Member int
	// GPUs is how many GPUs this process drives: --gpus N, 0 for every GPU
	// the machine has (--gpus all), 1 under torchrun.
	GPUs int
	// LocalRank is the GPU of the machine a torchrun process uses
	// (LOCAL_RANK); -1 when the process drives GPUs 0 to GPUs−1.
	LocalRank int
	// Addr is member 0's host:port: --rendezvous, or MASTER_ADDR:MASTER_PORT.
	Addr string
	// Token is the shared secret every member proves it knows:
	// --rendezvous-token or $MLBUILD_RENDEZVOUS_TOKEN.
	Token string
	// Timeout bounds the whole rendezvous (every member connected and
	// answered); 0 is DefaultTimeout.
	Timeout time.Duration
	// Handshake bounds one connection's handshake; 0 is DefaultHandshake.
	Handshake time.Duration
}

// Flags are the raw values of the command line's distributed flags, ""
// for a flag not given, so that ParseConfig can tell a flag from its
// default and from the environment.
type Flags struct {
	GPUs, Nodes, NodeRank, Rendezvous, Token, Timeout string
}

// TokenEnv is the environment variable that holds the rendezvous token,
// the way to pass it that ps(1) does not show.
const TokenEnv = "MLBUILD_RENDEZVOUS_TOKEN"

// MinTokenLen is the shortest token accepted: 16 characters, so that a
// token is not a guessable word (HMAC-SHA256 keys it; see docs/distributed.md).
const MinTokenLen = 16

// DefaultTimeout is how long a rendezvous waits for every member when
// --rendezvous-timeout is not given: long enough for nodes that start a
// minute apart under a scheduler, short enough that a typo fails today.
const DefaultTimeout = 5 * time.Minute

// ParseConfig makes the Config of a process from its flags and its
// environment (getenv; torchrun's MASTER_ADDR, MASTER_PORT, WORLD_SIZE,
// RANK and LOCAL_RANK, and TokenEnv). A flag is enough on its own; where
// a flag and its variable are both set they must agree, and a
// disagreement is an error naming both (a rank silently taken from the
// wrong one is how a job hangs). Without --nodes and WORLD_SIZE the run is
// one process on --gpus GPUs (default 1).
func ParseConfig(f Flags, getenv func(string) string) (Config, error) {
	c := Config{Members: 1, GPUs: 1, LocalRank: -1}
	var err error
	num := func(flag, val string, min int) (int, error) {
		n, err := strconv.Atoi(strings.TrimSpace(val))
		if err != nil || n < min {
			return 0, fmt.Errorf("%s %q: want a whole number, %d or more", flag, val, min)
		}
		return n, nil
	}
	// pick returns the flag's value, else the variable's; both set must agree.
	pick := func(flag, fv, env string, min int) (int, bool, error) {
		ev := getenv(env)
		var fn, en int
		if fv != "" {
			if fn, err = num("--"+flag, fv, min); err != nil {
				return 0, false, err
			}
		}
		if ev != "" {
			if en, err = num(env+"=", ev, min); err != nil {
				return 0, false, fmt.Errorf("in the environment: %w", err)
			}
		}
		switch {
		case fv != "" && ev != "" && fn != en:
			return 0, false, fmt.Errorf("--%s %d conflicts with %s=%d in the environment: give one, or make them agree", flag, fn, env, en)
		case fv != "":
			return fn, true, nil
		case ev != "":
			return en, true, nil
		}
		return 0, false, nil
	}
	members, haveMembers, err := pick("nodes", f.Nodes, "WORLD_SIZE", 1)
	if err != nil {
		return c, err
	}
	member, haveMember, err := pick("node-rank", f.NodeRank, "RANK", 0)
	if err != nil {
		return c, err
	}
	if haveMembers {
		c.Members = members
	}
	if haveMember {
		c.Member = member
	}
	if c.Member >= c.Members {
		return c, fmt.Errorf("node rank %d is out of range for %d nodes (0 to %d)", c.Member, c.Members, c.Members-1)
	}
	if lr := getenv("LOCAL_RANK"); lr != "" {
		if c.LocalRank, err = num("LOCAL_RANK=", lr, 0); err != nil {
			return c, fmt.Errorf("in the environment: %w", err)
		}
	}
	switch g := strings.TrimSpace(f.GPUs); {
	case g == "":
	case g == "all":
		c.GPUs = 0
	default:
		if c.GPUs, err = num("--gpus", g, 1); err != nil {
			return c, fmt.Errorf("%w, or all", err)
		}
	}
	if c.LocalRank >= 0 && (f.GPUs == "all" || c.GPUs > 1) {
		return c, fmt.Errorf("--gpus %s with LOCAL_RANK=%d: torchrun starts one process per GPU, so each drives one; drop --gpus, or run without torchrun", f.GPUs, c.LocalRank)
	}
	if f.Timeout != "" {
		if c.Timeout, err = time.ParseDuration(f.Timeout); err != nil || c.Timeout <= 0 {
			return c, fmt.Errorf("--rendezvous-timeout %q: want a duration such as 90s or 5m", f.Timeout)
		}
	}
	if c.Members == 1 {
		return c, nil // one process: no rendezvous, no token
	}

	c.Addr = f.Rendezvous
	host, port := getenv("MASTER_ADDR"), getenv("MASTER_PORT")
	if host != "" || port != "" {
		if host == "" || port == "" {
			return c, fmt.Errorf("MASTER_ADDR=%q and MASTER_PORT=%q in the environment: set both, or neither and --rendezvous HOST:PORT", host, port)
		}
		env := net.JoinHostPort(host, port)
		if c.Addr != "" && !sameAddr(c.Addr, env) {
			return c, fmt.Errorf("--rendezvous %s conflicts with MASTER_ADDR:MASTER_PORT %s in the environment: give one, or make them agree", c.Addr, env)
		}
		if c.Addr == "" {
			c.Addr = env
		}
	}
	if c.Addr == "" {
		return c, fmt.Errorf("%d nodes need --rendezvous HOST:PORT (node 0's address, the same on every node), or MASTER_ADDR and MASTER_PORT", c.Members)
	}
	if _, p, err := net.SplitHostPort(c.Addr); err != nil {
		return c, fmt.Errorf("--rendezvous %q: want HOST:PORT (%v)", c.Addr, err)
	} else if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
		return c, fmt.Errorf("--rendezvous %q: port %q is not a number from 1 to 65535", c.Addr, p)
	}

	c.Token = f.Token
	if ev := getenv(TokenEnv); ev != "" {
		if c.Token != "" && c.Token != ev {
			return c, fmt.Errorf("--rendezvous-token conflicts with $%s in the environment: give one (the variable keeps it out of ps)", TokenEnv)
		}
		c.Token = ev
	}
	if c.Token == "" {
		return c, fmt.Errorf("%d nodes need a shared token: set $%s (or --rendezvous-token) to the same secret of %d or more characters on every node, e.g. from `openssl rand -hex 16`", c.Members, TokenEnv, MinTokenLen)
	}
	if len(c.Token) < MinTokenLen {
		return c, fmt.Errorf("the rendezvous token has %d characters; use %d or more (e.g. `openssl rand -hex 16`), so that it cannot be guessed", len(c.Token), MinTokenLen)
	}
	return c, nil
}

// sameAddr reports whether two host:port strings name the same place as
// written (case of the host aside).
func sameAddr(a, b string) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil {
		return a == b
	}
	return strings.EqualFold(ha, hb) && pa == pb
}

// errConfig is wrapped by a Config that cannot start a rendezvous.
var errConfig = errors.New("rendezvous: bad configuration")

// check refuses a Config that Join cannot use.
func (c Config) check() error {
	switch {
	case c.Members < 2:
		return fmt.Errorf("%w: %d members; a rendezvous needs 2 or more", errConfig, c.Members)
	case c.Member < 0 || c.Member >= c.Members:
		return fmt.Errorf("%w: member %d of %d", errConfig, c.Member, c.Members)
	case len(c.Token) < MinTokenLen:
		return fmt.Errorf("%w: a token of %d characters; %d or more are needed", errConfig, len(c.Token), MinTokenLen)
	case c.Addr == "":
		return fmt.Errorf("%w: no address", errConfig)
	}
	return nil
}
