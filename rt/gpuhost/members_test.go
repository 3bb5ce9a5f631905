package gpuhost

import (
	"strings"
	"testing"
)

// TestDistributedConfig: the flags of a train command line and torchrun's
// variables make a member's configuration; under torchrun the rendezvous
// takes the port after MASTER_PORT (torchrun's agent holds that one),
// unless --rendezvous names one.
func TestDistributedConfig(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	token := "MLBUILD_RENDEZVOUS_TOKEN"
	for _, c := range []struct {
		args    []string
		env     func(string) string
		members int
		addr    string
		err     string
	}{
		{[]string{"train", "--nodes", "2", "--node-rank", "1", "--rendezvous", "h:29500"}, env(token, "0123456789abcdef"), 2, "h:29500", ""},
		{[]string{"train"}, env(token, "0123456789abcdef", "WORLD_SIZE", "4", "RANK", "3", "LOCAL_RANK", "1", "MASTER_ADDR", "h", "MASTER_PORT", "29500"), 4, "h:29500", ""},
		{[]string{"train"}, env(token, "0123456789abcdef", "WORLD_SIZE", "4", "RANK", "3", "LOCAL_RANK", "1", "MASTER_ADDR", "h", "MASTER_PORT", "29500", "TORCHELASTIC_RUN_ID", "x"), 4, "h:29501", ""},
		{[]string{"train", "--rendezvous", "h:7000"}, env(token, "0123456789abcdef", "WORLD_SIZE", "2", "RANK", "0", "TORCHELASTIC_RUN_ID", "x"), 2, "h:7000", ""},
		{[]string{"train"}, env(token, "0123456789abcdef", "WORLD_SIZE", "2", "RANK", "0", "MASTER_ADDR", "h", "MASTER_PORT", "65535", "TORCHELASTIC_RUN_ID", "x"), 0, "", "and there is none"},
		{[]string{"train", "--gpus", "x"}, env(), 0, "", "--gpus must be"},
		{[]string{"train", "--nodes", "2", "--node-rank", "0", "--rendezvous", "h:1"}, env(), 0, "", "need a shared token"},
		{[]string{"eval", "--nodes", "2"}, env(), 1, "", ""},
	} {
		cfg, err := DistributedConfig(c.args, c.env)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %v, want an error saying %q", c.args, err, c.err)
			}
		case err != nil || cfg.Members != c.members || cfg.Addr != c.addr:
			t.Errorf("%q: %d members at %q, %v; want %d at %q", c.args, cfg.Members, cfg.Addr, err, c.members, c.addr)
		}
	}
}
