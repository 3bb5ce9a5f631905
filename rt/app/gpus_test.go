package app

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// TestGPUsOf: --gpus of a train command line, read before the devices
// open, in each of flag's spellings; other commands and malformed values.
func TestGPUsOf(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int
		err  string
	}{
		{nil, 1, ""},
		{[]string{"train", "--data", "d"}, 1, ""},
		{[]string{"train", "--gpus", "4", "--data", "d"}, 4, ""},
		{[]string{"train", "-gpus=2"}, 2, ""},
		{[]string{"train", "--gpus=all"}, 0, ""},
		{[]string{"eval", "--gpus", "4"}, 1, ""}, // eval refuses the flag itself
		{[]string{"train", "--", "--gpus", "4"}, 1, ""},
		{[]string{"train", "--gpus", "0"}, 0, "--gpus must be a number of GPUs (1 or more) or all, got \"0\""},
		{[]string{"train", "--gpus", "two"}, 0, "got \"two\""},
	} {
		got, err := GPUsOf(c.args)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("GPUsOf(%q) = %d, %v; want an error saying %q", c.args, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("GPUsOf(%q) = %d, %v; want %d", c.args, got, err, c.want)
		}
	}
}

// replicasModel is a Model that says it trains on n GPUs.
type replicasModel struct {
	Model
	n int
}

func (r replicasModel) GPUs() int { return r.n }

// TestCheckGPUs: a program on one device refuses --gpus 2; a replicated
// model accepts its own count or all.
func TestCheckGPUs(t *testing.T) {
	m := newLinearModel()
	for _, v := range []string{"1", "all"} {
		if err := checkGPUs(m, &trainOptions{gpus: v}); err != nil {
			t.Errorf("--gpus %s on one device: %v", v, err)
		}
	}
	if err := checkGPUs(m, &trainOptions{gpus: "2"}); err == nil || !strings.Contains(err.Error(), "runs on 1 device(s)") {
		t.Errorf("--gpus 2 on one device: %v; want a refusal", err)
	}
	r := replicasModel{m, 2}
	for _, v := range []string{"2", "all"} {
		if err := checkGPUs(r, &trainOptions{gpus: v}); err != nil {
			t.Errorf("--gpus %s on 2 GPUs: %v", v, err)
		}
	}
	if err := checkGPUs(r, &trainOptions{gpus: "4"}); err == nil {
		t.Errorf("--gpus 4 on 2 GPUs: no error")
	}
}

// TestNodeFlagsOnOneMachine: a program that trains on one machine (here
// the CPU) refuses --nodes, the rendezvous's flags and torchrun's
// WORLD_SIZE with exit status 2 and a message naming them, and takes
// --nodes 1; a member of several (an OutputWriter) takes them all.
func TestNodeFlagsOnOneMachine(t *testing.T) {
	dir := t.TempDir()
	train := func(extra ...string) []string {
		return append([]string{"train", "--data", dir, "--out", filepath.Join(dir, "w.safetensors")}, extra...)
	}
	for _, c := range []struct {
		args []string
		env  string
		want string
	}{
		{train("--nodes", "2", "--node-rank", "0", "--rendezvous", "h:1"), "", "--nodes 2: this program trains on one machine"},
		{train("--rendezvous", "h:1"), "", "--rendezvous is for a run on several machines"},
		{train("--rendezvous-token", "0123456789abcdef"), "", "--rendezvous-token is for a run on several machines"},
		{train(), "2", "WORLD_SIZE=2 in the environment (torchrun's): this program trains on one machine"},
	} {
		t.Setenv("WORLD_SIZE", c.env)
		var out, errs strings.Builder
		if code := Run(newLinearModel(), c.args, &out, &errs); code != 2 || !strings.Contains(errs.String(), c.want) {
			t.Errorf("%q (WORLD_SIZE=%q): exit status %d, want 2 and %q in:\n%s", c.args, c.env, code, c.want, errs.String())
		}
	}
	t.Setenv("WORLD_SIZE", "")
	if err := checkGPUs(newLinearModel(), &trainOptions{gpus: "1", nodes: "1"}); err != nil {
		t.Errorf("--nodes 1: %v", err)
	}
	member := writerModel{replicasModel{newLinearModel(), 1}}
	if err := checkGPUs(member, &trainOptions{gpus: "1", nodes: "2"}); err != nil {
		t.Errorf("--nodes 2 on a member of several: %v", err)
	}
}

// writerModel is a member of a run of several that is not global rank 0.
type writerModel struct{ replicasModel }

func (writerModel) WritesOutputs() bool { return false }

// TestTrainFlagOf: the value of a flag of train, before the command runs.
func TestTrainFlagOf(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"train", "--nodes", "2"}, "2"},
		{[]string{"train", "-nodes=3", "--nodes-x", "9"}, "3"},
		{[]string{"train", "--", "--nodes", "2"}, ""},
		{[]string{"eval", "--nodes", "2"}, ""},
		{[]string{"train", "--rendezvous", "h:1", "--rendezvous", "h:2"}, ""},
	} {
		name := "nodes"
		if strings.Contains(strings.Join(c.args, " "), "rendezvous") {
			name, c.want = "rendezvous", "h:2"
		}
		if got := TrainFlagOf(c.args, name); got != c.want {
			t.Errorf("TrainFlagOf(%q, %q) = %q, want %q", c.args, name, got, c.want)
		}
	}
}

// syncBNModel is Replicas with SetSyncBN, which fails with err.
type syncBNModel struct {
	replicasModel
	err error
	set *bool
}

func (s syncBNModel) SetSyncBN() error {
	*s.set = true
	return s.err
}

// TestSyncBN: --sync-bn is refused, with exit status 2 and what it
// needs, by a program that trains on the CPU (or one device); on several
// GPUs it switches synchronised batch norm on, and a model without batch
// norm is refused with the model's reason.
func TestSyncBN(t *testing.T) {
	m := newLinearModel()
	var out, errs strings.Builder
	code := Run(m, []string{"train", "--data", t.TempDir(), "--sync-bn"}, &out, &errs)
	if code != exitUsage || !strings.Contains(errs.String(), "--sync-bn synchronises batch norm across several GPUs") || !strings.Contains(errs.String(), "--gpus 2 or more") {
		t.Errorf("train --sync-bn on the CPU: exit status %d, stderr %q; want 2 and what it needs", code, errs.String())
	}
	if err := checkSyncBN(m, &trainOptions{}); err != nil {
		t.Errorf("no --sync-bn: %v", err)
	}
	set := false
	r := syncBNModel{replicasModel{m, 2}, nil, &set}
	if err := checkSyncBN(r, &trainOptions{syncBN: true}); err != nil || !set {
		t.Errorf("--sync-bn on 2 GPUs: %v, switched on %v", err, set)
	}
	set = false
	if err := checkSyncBN(r, &trainOptions{}); err != nil || set {
		t.Errorf("no --sync-bn on 2 GPUs: %v, switched on %v", err, set)
	}
	r.err = errors.New("--sync-bn: m has no batch norm layer")
	err := checkSyncBN(r, &trainOptions{syncBN: true})
	var u usageError
	if !errors.As(err, &u) || !strings.Contains(err.Error(), "no batch norm") {
		t.Errorf("--sync-bn on a model without batch norm: %v; want a usage error saying so", err)
	}
}
