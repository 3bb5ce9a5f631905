package rendezvous

import (
	"strings"
	"testing"
	"time"
)

const goodToken = "0123456789abcdef0123"

func TestParseConfig(t *testing.T) {
	for _, c := range []struct {
		name string
		f    Flags
		env  map[string]string
		want Config
		err  string
	}{
		{name: "one process, defaults", want: Config{Members: 1, GPUs: 1, LocalRank: -1}},
		{name: "one process, every GPU", f: Flags{GPUs: "all"}, want: Config{Members: 1, GPUs: 0, LocalRank: -1}},
		{name: "one process needs no token", f: Flags{GPUs: "4", Nodes: "1"}, want: Config{Members: 1, GPUs: 4, LocalRank: -1}},
		{name: "flags", f: Flags{GPUs: "4", Nodes: "2", NodeRank: "1", Rendezvous: "node0:29500", Token: goodToken, Timeout: "90s"},
			want: Config{Members: 2, Member: 1, GPUs: 4, LocalRank: -1, Addr: "node0:29500", Token: goodToken, Timeout: 90 * time.Second}},
		{name: "torchrun's variables", env: map[string]string{"WORLD_SIZE": "8", "RANK": "5", "LOCAL_RANK": "1", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", TokenEnv: goodToken},
			want: Config{Members: 8, Member: 5, GPUs: 1, LocalRank: 1, Addr: "10.0.0.1:29500", Token: goodToken}},
		{name: "IPv6 master", env: map[string]string{"WORLD_SIZE": "2", "RANK": "0", "MASTER_ADDR": "fe80::1", "MASTER_PORT": "29500", TokenEnv: goodToken},
			want: Config{Members: 2, GPUs: 1, LocalRank: -1, Addr: "[fe80::1]:29500", Token: goodToken}},
		{name: "flags and variables that agree", f: Flags{Nodes: "2", NodeRank: "0", Rendezvous: "NODE0:29500"},
			env:  map[string]string{"WORLD_SIZE": "2", "RANK": "0", "MASTER_ADDR": "node0", "MASTER_PORT": "29500", TokenEnv: goodToken},
			want: Config{Members: 2, GPUs: 1, LocalRank: -1, Addr: "NODE0:29500", Token: goodToken}},
		{name: "rank conflict", f: Flags{Nodes: "2", NodeRank: "1"}, env: map[string]string{"RANK": "0"},
			err: "--node-rank 1 conflicts with RANK=0 in the environment"},
		{name: "world size conflict", f: Flags{Nodes: "2"}, env: map[string]string{"WORLD_SIZE": "4"},
			err: "--nodes 2 conflicts with WORLD_SIZE=4"},
		{name: "address conflict", f: Flags{Nodes: "2", Rendezvous: "a:1"}, env: map[string]string{"MASTER_ADDR": "b", "MASTER_PORT": "1", TokenEnv: goodToken},
			err: "--rendezvous a:1 conflicts with MASTER_ADDR:MASTER_PORT b:1"},
		{name: "token conflict", f: Flags{Nodes: "2", Rendezvous: "a:1", Token: goodToken + "x"}, env: map[string]string{TokenEnv: goodToken},
			err: "--rendezvous-token conflicts with $MLBUILD_RENDEZVOUS_TOKEN"},
		{name: "rank out of range", f: Flags{Nodes: "2", NodeRank: "2"}, err: "node rank 2 is out of range for 2 nodes (0 to 1)"},
		{name: "bad number", f: Flags{Nodes: "two"}, err: `--nodes "two": want a whole number, 1 or more`},
		{name: "bad variable", env: map[string]string{"RANK": "-1"}, err: `in the environment: RANK= "-1": want a whole number, 0 or more`},
		{name: "bad gpus", f: Flags{GPUs: "0"}, err: `--gpus "0": want a whole number, 1 or more, or all`},
		{name: "gpus under torchrun", f: Flags{GPUs: "4"}, env: map[string]string{"LOCAL_RANK": "0"}, err: "torchrun starts one process per GPU"},
		{name: "no address", f: Flags{Nodes: "2"}, env: map[string]string{TokenEnv: goodToken}, err: "2 nodes need --rendezvous HOST:PORT"},
		{name: "half the master", f: Flags{Nodes: "2"}, env: map[string]string{"MASTER_ADDR": "a"}, err: `MASTER_ADDR="a" and MASTER_PORT="" in the environment: set both`},
		{name: "bad port", f: Flags{Nodes: "2", Rendezvous: "a:99999", Token: goodToken}, err: `port "99999" is not a number from 1 to 65535`},
		{name: "no port", f: Flags{Nodes: "2", Rendezvous: "a", Token: goodToken}, err: `--rendezvous "a": want HOST:PORT`},
		{name: "no token", f: Flags{Nodes: "2", Rendezvous: "a:1"}, err: "2 nodes need a shared token: set $MLBUILD_RENDEZVOUS_TOKEN"},
		{name: "short token", f: Flags{Nodes: "2", Rendezvous: "a:1", Token: "secret"}, err: "the rendezvous token has 6 characters; use 16 or more"},
		{name: "bad timeout", f: Flags{Timeout: "soon"}, err: `--rendezvous-timeout "soon"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseConfig(c.f, func(k string) string { return c.env[k] })
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("ParseConfig = %+v, %v; want an error containing %q", got, err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("ParseConfig =\n %+v, want\n %+v", got, c.want)
			}
		})
	}
}
