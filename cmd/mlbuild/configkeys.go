package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mlbuild/mlbuild/spec"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// checkConfigKeys refuses a configuration file with a key that no command
// has as a flag: a misspelt key (cahce-dir) would otherwise be ignored
// without a word, and the setting silently not applied. A key of another
// command's flag is fine, so that one file serves every command.
func checkConfigKeys(v *viper.Viper, file string, root *cobra.Command) error {
	known := map[string]bool{}
	var add func(c *cobra.Command)
	add = func(c *cobra.Command) {
		visit := func(f *pflag.Flag) { known[f.Name] = true }
		c.Flags().VisitAll(visit)
		c.PersistentFlags().VisitAll(visit)
		for _, sub := range c.Commands() {
			add(sub)
		}
	}
	add(root)
	var names []string
	for k := range known {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, key := range v.AllKeys() {
		if known[key] {
			continue
		}
		hint := ""
		if near := closest(key, names); near != "" {
			hint = fmt.Sprintf("; did you mean %q?", near)
		}
		return withCode(ExitUsage, fmt.Errorf("%s: unknown setting %q%s (settings are the commands' flags: %s)", file, key, hint, strings.Join(names, ", ")))
	}
	return nil
}

// closest returns the name within edit distance 2 of key, or "".
func closest(key string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if d := spec.EditDistance(key, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}
