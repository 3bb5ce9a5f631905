package app

import (
	"errors"
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
