package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/mlbuild/mlbuild/cache"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newCacheCmd) }

// cacheDirKey is the viper key of the cache location: the --cache-dir flag,
// MLBUILD_CACHE_DIR, or cache-dir in mlbuild.yaml, in that order.
const cacheDirKey = "cache-dir"

// addCacheDirFlag gives cmd (and, as a persistent flag, its subcommands) the
// --cache-dir flag. `mlbuild compile` may call it too.
func addCacheDirFlag(cmd *cobra.Command) {
	cmd.PersistentFlags().String(cacheDirKey, "", "build cache directory (default: $"+cache.EnvDir+", else mlbuild in the user cache dir)")
}

// resolveCacheDir is the cache directory the command line, the environment
// and mlbuild.yaml ask for, else cache.DefaultDir.
func resolveCacheDir(g *globalOptions) (string, error) {
	if g.config != nil {
		if d := g.config.GetString(cacheDirKey); d != "" {
			return d, nil
		}
	}
	d, err := cache.DefaultDir()
	if err != nil {
		return "", withCode(ExitIO, err)
	}
	return d, nil
}

// openCache opens (creating if needed) the cache resolveCacheDir names;
// failures carry ExitIO.
func openCache(g *globalOptions) (*cache.Cache, error) {
	dir, err := resolveCacheDir(g)
	if err != nil {
		return nil, err
	}
	c, err := cache.Open(dir)
	if err != nil {
		return nil, withCode(ExitIO, err)
	}
	return c, nil
}

// cacheOptions are what every cache subcommand needs.
type cacheOptions struct {
	Dir    string
	Stdout io.Writer
}

// cacheLsOptions are the settings of `mlbuild cache ls`.
type cacheLsOptions struct {
	cacheOptions
	JSON bool
}

// cacheTrimOptions are the settings of `mlbuild cache trim`.
type cacheTrimOptions struct {
	cacheOptions
	MaxAge time.Duration
}

func newCacheCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cache",
		Short: "Show and manage the build cache",
		Long: `mlbuild keeps the binaries it compiles in a build cache, keyed by a hash of
everything that changes the generated program: the canonical plan, the
mlbuild version, the backend, the target and the Go version. Runtime settings
(epochs, learning rate, data paths) are not part of the key, so changing them
needs no rebuild. A damaged entry is detected and rebuilt, with a note.

The cache lives where --cache-dir says, else in $MLBUILD_CACHE_DIR, else
where cache-dir in mlbuild.yaml says, else in "mlbuild" under the user cache
directory (~/.cache on Linux, ~/Library/Caches on macOS). Entries unused for
5 days are trimmed automatically, at most once a day.

Setting MLBUILD_DEBUG=cachekey makes mlbuild compile print the lines its cache
key is hashed from (diff two runs to see why one missed the cache);
MLBUILD_DEBUG=cacheverify rebuilds on every hit and fails if the new binary
differs from the cached one.`,
		Example: `  # Where is the cache?
  mlbuild cache dir

  # What is in it?
  mlbuild cache ls

  # Remove everything not used in two days, then everything.
  mlbuild cache trim --max-age 2d
  mlbuild cache clean`,
	}
	addCacheDirFlag(cmd)
	cmd.AddCommand(newCacheDirCmd(g), newCacheLsCmd(g), newCacheCleanCmd(g), newCacheTrimCmd(g))
	return cmd
}

// cacheOptionsFrom fills the options shared by the cache subcommands.
func cacheOptionsFrom(g *globalOptions) (cacheOptions, error) {
	dir, err := resolveCacheDir(g)
	if err != nil {
		return cacheOptions{}, err
	}
	return cacheOptions{Dir: dir, Stdout: g.stdout}, nil
}

func newCacheDirCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "dir",
		Short: "Print the build cache's directory",
		Long: `Print the directory of the build cache, whether or not it exists yet.
It does not create it.`,
		Example: `  mlbuild cache dir
  du -sh "$(mlbuild cache dir)"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := cacheOptionsFrom(g)
			if err != nil {
				return err
			}
			return cacheDirRun(opts)
		},
	}
}

// cacheDirRun prints the cache directory.
func cacheDirRun(opts cacheOptions) error {
	_, err := fmt.Fprintln(opts.Stdout, opts.Dir)
	return err
}

func newCacheLsCmd(g *globalOptions) *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the entries of the build cache",
		Long: `List the entries of the build cache, most recently used first: the action
ID (the first 12 hex digits of the cache key), the model, backend and target
it was compiled for, the binary's size, when it was last used, the mlbuild
version that built it and the spec file it came from. A last line gives the
count and total size. Entries that cannot be read are left out; the next
compile of their model rebuilds them.

With --json, it prints one JSON array of objects instead, with full IDs and
RFC 3339 times.`,
		Example: `  mlbuild cache ls
  mlbuild cache ls --json | jq '.[] | select(.model == "mnist")'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := cacheOptionsFrom(g)
			if err != nil {
				return err
			}
			return cacheLsRun(cacheLsOptions{cacheOptions: opts, JSON: jsonOut})
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print a JSON array instead of a table")
	return cmd
}

// cacheExists says whether dir exists, so that ls, clean and trim do not
// create a cache just to find it empty.
func cacheExists(dir string) (bool, error) {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, withCode(ExitIO, fmt.Errorf("cache: %v", err))
	}
	if !fi.IsDir() {
		return false, withCode(ExitIO, fmt.Errorf("cache: %s is not a directory", dir))
	}
	return true, nil
}

// lsEntry is one element of `mlbuild cache ls --json`.
type lsEntry struct {
	ActionID  string    `json:"actionID"`
	OutputID  string    `json:"outputID"`
	Size      int64     `json:"size"`
	Built     time.Time `json:"built"`
	LastUsed  time.Time `json:"lastUsed"`
	Model     string    `json:"model"`
	Backend   string    `json:"backend"`
	Target    string    `json:"target"`
	Version   string    `json:"version"`
	GoVersion string    `json:"goVersion"`
	Source    string    `json:"source"`
}

// cacheLsRun lists the cache's entries as a table or as JSON.
func cacheLsRun(opts cacheLsOptions) error {
	var entries []cache.Entry
	ok, err := cacheExists(opts.Dir)
	if err != nil {
		return err
	}
	if ok {
		c, err := cache.Open(opts.Dir)
		if err != nil {
			return withCode(ExitIO, err)
		}
		if entries, err = c.List(); err != nil {
			return withCode(ExitIO, err)
		}
	}
	if opts.JSON {
		list := make([]lsEntry, 0, len(entries))
		for _, e := range entries {
			list = append(list, lsEntry{
				ActionID: e.ActionID.String(), OutputID: e.OutputID.String(), Size: e.Size,
				Built: e.Time.UTC(), LastUsed: e.Used.UTC(),
				Model: e.Label.Model, Backend: e.Label.Backend, Target: e.Label.Target,
				Version: e.Label.Version, GoVersion: e.Label.GoVersion, Source: e.Label.Source,
			})
		}
		enc := json.NewEncoder(opts.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(list)
	}
	if len(entries) == 0 {
		_, err := fmt.Fprintf(opts.Stdout, "no entries in %s\n", opts.Dir)
		return err
	}
	tw := tabwriter.NewWriter(opts.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ACTION\tMODEL\tBACKEND\tTARGET\tSIZE\tLAST USED\tMLBUILD\tSOURCE")
	var total int64
	for _, e := range entries {
		total += e.Size
		l := e.Label
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.ActionID.Short(),
			cell(l.Model), cell(l.Backend), cell(l.Target), humanBytes(e.Size),
			e.Used.Local().Format("2006-01-02 15:04"), cell(l.Version), cell(l.Source))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(opts.Stdout, "%s, %s in %s\n", countEntries(len(entries)), humanBytes(total), opts.Dir)
	return err
}

// countEntries writes "1 entry" or "n entries".
func countEntries(n int) string {
	if n == 1 {
		return "1 entry"
	}
	return fmt.Sprintf("%d entries", n)
}

// cell makes a label printable in one table cell: "-" when empty, Go-quoted
// when it holds spaces, tabs, newlines or terminal escapes (labels come from
// specs, which may be hostile).
func cell(s string) string {
	if s == "" {
		return "-"
	}
	for _, r := range s {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) || r == '"' {
			return strconv.Quote(s)
		}
	}
	return s
}

// humanBytes writes n in B, KiB, MiB or GiB with one decimal.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/unit, 0
	for v >= unit && i < 2 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %s", v, []string{"KiB", "MiB", "GiB"}[i])
}

func newCacheCleanCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "clean",
		Short: "Remove every entry of the build cache",
		Long: `Remove every entry of the build cache, keeping the directory and its
README. Compiles afterwards start cold. A compile running at the same time
may fail; run it again.`,
		Example: `  mlbuild cache clean`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := cacheOptionsFrom(g)
			if err != nil {
				return err
			}
			return cacheCleanRun(opts)
		},
	}
}

// cacheCleanRun empties the cache and says what it removed.
func cacheCleanRun(opts cacheOptions) error {
	ok, err := cacheExists(opts.Dir)
	if err != nil {
		return err
	}
	if !ok {
		_, err := fmt.Fprintf(opts.Stdout, "no cache at %s; nothing to clean\n", opts.Dir)
		return err
	}
	c, err := cache.Open(opts.Dir)
	if err != nil {
		return withCode(ExitIO, err)
	}
	r, err := c.Clean()
	if err != nil {
		return withCode(ExitIO, err)
	}
	_, err = fmt.Fprintf(opts.Stdout, "removed %s (%s) from %s\n", countEntries(r.Entries), humanBytes(r.Bytes), opts.Dir)
	return err
}

func newCacheTrimCmd(g *globalOptions) *cobra.Command {
	var maxAge string
	cmd := &cobra.Command{
		Use:   "trim",
		Short: "Remove build cache entries not used for a while",
		Long: `Remove the entries of the build cache not used for --max-age (default 5d,
the rule mlbuild also applies by itself at most once a day), and temporary
files left by compiles that were killed. An entry counts as used when a
compile finds it. Ages are Go durations (90m, 36h) or whole days (5d).`,
		Example: `  mlbuild cache trim
  mlbuild cache trim --max-age 12h`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			age, err := parseAge(maxAge)
			if err != nil {
				return withCode(ExitUsage, fmt.Errorf("--max-age: %v", err))
			}
			opts, err := cacheOptionsFrom(g)
			if err != nil {
				return err
			}
			return cacheTrimRun(cacheTrimOptions{cacheOptions: opts, MaxAge: age})
		},
	}
	cmd.Flags().StringVar(&maxAge, "max-age", "5d", "remove entries unused for this long")
	return cmd
}

// parseAge reads a Go duration or a whole number of days ("5d").
func parseAge(s string) (time.Duration, error) {
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || n > 100000 {
			return 0, fmt.Errorf("%q is not a whole number of days", s)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("%q is neither a duration (90m, 36h) nor days (5d)", s)
		}
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is negative", s)
	}
	return d, nil
}

// formatAge writes an age the way parseAge reads it: whole days as "5d".
func formatAge(d time.Duration) string {
	const day = 24 * time.Hour
	if d > 0 && d%day == 0 {
		return fmt.Sprintf("%dd", d/day)
	}
	return d.String()
}

// cacheTrimRun trims the cache and says what it removed and what is left.
func cacheTrimRun(opts cacheTrimOptions) error {
	ok, err := cacheExists(opts.Dir)
	if err != nil {
		return err
	}
	if !ok {
		_, err := fmt.Fprintf(opts.Stdout, "no cache at %s; nothing to trim\n", opts.Dir)
		return err
	}
	c, err := cache.Open(opts.Dir)
	if err != nil {
		return withCode(ExitIO, err)
	}
	r, err := c.Trim(opts.MaxAge)
	if err != nil {
		return withCode(ExitIO, err)
	}
	left, err := c.List()
	if err != nil {
		return withCode(ExitIO, err)
	}
	var leftBytes int64
	for _, e := range left {
		leftBytes += e.Size
	}
	_, err = fmt.Fprintf(opts.Stdout, "removed %s (%s) unused for %s; %s (%s) remain\n",
		countEntries(r.Entries), humanBytes(r.Bytes), formatAge(opts.MaxAge), countEntries(len(left)), humanBytes(leftBytes))
	return err
}
