package main

import (
	"runtime/debug"
	"testing"
)

// TestVersionFromBuildInfo: a build that the go command stamped with its
// module version prints that; one whose module version is "(devel)" (a
// checkout built with go install ./cmd/mlbuild) prints its commit when the
// build recorded it, and plain "devel" only when it recorded nothing.
func TestVersionFromBuildInfo(t *testing.T) {
	setting := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	for _, c := range []struct {
		main     string
		settings []debug.BuildSetting
		want     string
		exact    bool
	}{
		{"v1.2.3", nil, "v1.2.3", true},
		{"v0.0.0-20261128124550-b11fd99b613a", setting("vcs.revision", "b11fd99b613a9427504f16fcaa29c75706c9b3ea"), "v0.0.0-20261128124550-b11fd99b613a", true},
		{"(devel)", setting("vcs.revision", "b11fd99b613a9427504f16fcaa29c75706c9b3ea", "vcs.modified", "false"), "devel-b11fd99b613a", true},
		{"(devel)", setting("vcs.revision", "b11fd99b613a9427504f16fcaa29c75706c9b3ea", "vcs.modified", "true"), "devel-b11fd99b613a-dirty", false},
		{"(devel)", nil, "devel", false},
		{"", nil, "devel", false},
	} {
		bi := &debug.BuildInfo{Main: debug.Module{Version: c.main}, Settings: c.settings}
		got := versionFromBuildInfo(bi)
		if got != c.want {
			t.Errorf("main %q settings %v: version %q, want %q", c.main, c.settings, got, c.want)
		}
		if versionIsExact(got) != c.exact {
			t.Errorf("versionIsExact(%q) = %v, want %v", got, !c.exact, c.exact)
		}
	}
}
