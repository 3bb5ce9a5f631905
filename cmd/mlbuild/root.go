package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"
)

// Exit codes of mlbuild, one per class of failure. They are documented in the
// README; scripts may rely on them.
const (
	ExitOK       = 0  // success
	ExitInvalid  = 1  // a spec (or another input file) is not legal: the messages say where and why
	ExitUsage    = 2  // the command line is wrong
	ExitBuild    = 3  // planning, code generation or the Go build failed
	ExitIO       = 4  // a file could not be read or written, or the cache is unusable
	ExitInternal = 70 // a bug in mlbuild: please report it
)

// exitError carries an exit code through cobra's error return.
type exitError struct {
	code int
	err  error // nil when the messages were already printed
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// withCode wraps err so that mlbuild exits with code.
func withCode(code int, err error) error { return &exitError{code: code, err: err} }

// silentExit makes mlbuild exit with code without printing anything more.
func silentExit(code int) error { return &exitError{code: code} }

// globalOptions are settings every command reads, resolved by viper from
// flags, MLBUILD_* environment variables and mlbuild.yaml (in the current
// directory or the user's config directory), in that order of precedence.
type globalOptions struct {
	config *viper.Viper
	stdout io.Writer
	stderr io.Writer
}

// newRootCmd builds the command tree.
func newRootCmd(g *globalOptions) *cobra.Command {
	root := &cobra.Command{
		Use:   "mlbuild",
		Short: "Build neural networks from shape-checked CUE specs",
		Long: `mlbuild checks a model written as a CUE spec, plans it (every shape known,
the backward pass derived, buffers planned, ops fused) and compiles it to a
standalone binary that trains, evaluates and runs that one model.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			return loadConfig(g, cmd)
		},
	}
	root.Version = mlbuildVersion()
	root.SetVersionTemplate(versionLine())
	root.SetOut(g.stdout)
	root.SetErr(g.stderr)
	root.PersistentFlags().String("config", "", "configuration file (default: ./mlbuild.yaml, then the user config dir)")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return withCode(ExitUsage, fmt.Errorf("%v\nRun '%s --help' for usage.", err, c.CommandPath()))
	})
	for _, add := range subcommands {
		root.AddCommand(add(g))
	}
	root.InitDefaultCompletionCmd() // cobra adds it at Execute; here so that it is walked below
	refuseUnknownSubcommands(root)
	return root
}

// refuseUnknownSubcommands makes every command below the root that only
// groups subcommands (cache, completion) refuse an unknown one as a usage
// error naming the nearest, as cobra does for the root's: by default cobra
// prints such a command's help and exits 0, so `mlbuild cache trm` looked
// like success.
func refuseUnknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if !c.HasParent() || !c.HasSubCommands() || c.Runnable() {
		return
	}
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if cmd.SuggestionsMinimumDistance <= 0 {
			cmd.SuggestionsMinimumDistance = 2 // cobra's default, which it sets only for the root
		}
		if near := cmd.SuggestionsFor(args[0]); len(near) > 0 {
			msg += fmt.Sprintf("; did you mean %q?", near[0])
		}
		var names []string
		for _, sub := range cmd.Commands() {
			if sub.IsAvailableCommand() {
				names = append(names, sub.Name())
			}
		}
		return withCode(ExitUsage, fmt.Errorf("%s (its commands: %s)\nRun '%s --help' for usage.", msg, strings.Join(names, ", "), cmd.CommandPath()))
	}
}

// subcommands lists the constructors of mlbuild's commands; each command's
// file adds itself here from an init function, so that commands do not
// collide in one list.
var subcommands []func(*globalOptions) *cobra.Command

// loadConfig reads mlbuild.yaml and the environment into g.config and binds
// the command's flags, so that a flag given on the command line wins.
func loadConfig(g *globalOptions, cmd *cobra.Command) error {
	v := viper.New()
	v.SetEnvPrefix("MLBUILD")
	v.SetEnvKeyReplacer(strings.NewReplacer("-", "_"))
	v.AutomaticEnv()
	if f, _ := cmd.Flags().GetString("config"); f != "" {
		v.SetConfigFile(f)
		if err := v.ReadInConfig(); err != nil {
			return withCode(ExitUsage, fmt.Errorf("reading config %s: %v", f, err))
		}
	} else if f := findConfig(); f != "" {
		v.SetConfigFile(f)
		if err := v.ReadInConfig(); err != nil {
			return withCode(ExitUsage, fmt.Errorf("reading %s: %v", f, err))
		}
	}
	if f := v.ConfigFileUsed(); f != "" {
		if err := checkConfigKeys(v, f, cmd.Root()); err != nil {
			return err
		}
	}
	if err := v.BindPFlags(cmd.Flags()); err != nil {
		return withCode(ExitInternal, err)
	}
	g.config = v
	return nil
}

// findConfig returns the first mlbuild.yaml found in the current directory
// or the user's config directory, or "". The name is matched exactly (a
// binary called mlbuild next to it is not a config file).
func findConfig() string {
	dirs := []string{"."}
	if dir, err := os.UserConfigDir(); err == nil {
		dirs = append(dirs, filepath.Join(dir, "mlbuild"))
	}
	for _, d := range dirs {
		for _, name := range []string{"mlbuild.yaml", "mlbuild.yml"} {
			p := filepath.Join(d, name)
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
				return p
			}
		}
	}
	return ""
}

// run executes mlbuild with args and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) (code int) {
	defer recoverBug(stderr, &code)
	g := &globalOptions{stdout: stdout, stderr: stderr}
	root := newRootCmd(g)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintf(stderr, "mlbuild: %v\n", ee.err)
		}
		return ee.code
	}
	// cobra's own errors (unknown command, wrong number of args) are usage errors.
	fmt.Fprintf(stderr, "mlbuild: %v\n", err)
	return ExitUsage
}
