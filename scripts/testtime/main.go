// Command testtime reads `go test -json` output on standard input and
// prints where the time went: each package's elapsed seconds, then the
// slowest top-level tests (subtests are counted inside their parent; with
// -sub, subtests are listed too: a parallel subtest's time can fall
// outside its parent's).
//
//	go test -json -count=1 ./... > test.json
//	go run ./scripts/testtime -n 15 < test.json
//
// The times are wall seconds as go test reports them; on a loaded machine
// compare CPU time (/usr/bin/time around the whole run) as well.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
)

type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
}

type row struct {
	name    string
	action  string
	elapsed float64
}

func main() {
	n := flag.Int("n", 15, "how many of the slowest tests to list")
	sub := flag.Bool("sub", false, "list subtests too")
	flag.Parse()
	var pkgs, tests []row
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue // a build line or other text
		}
		if e.Action != "pass" && e.Action != "fail" {
			continue
		}
		short := strings.TrimPrefix(strings.TrimPrefix(e.Package, "github.com/mlbuild/mlbuild"), "/")
		if short == "" {
			short = "."
		}
		switch {
		case e.Test == "":
			pkgs = append(pkgs, row{short, e.Action, e.Elapsed})
		case *sub || !strings.Contains(e.Test, "/"):
			tests = append(tests, row{short + " " + e.Test, e.Action, e.Elapsed})
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "testtime:", err)
		os.Exit(1)
	}
	byTime := func(rs []row) {
		sort.Slice(rs, func(i, j int) bool { return rs[i].elapsed > rs[j].elapsed })
	}
	byTime(pkgs)
	byTime(tests)
	total := 0.0
	fmt.Println("packages (seconds):")
	for _, r := range pkgs {
		total += r.elapsed
		fmt.Printf("%8.1f  %-4s %s\n", r.elapsed, r.action, r.name)
	}
	fmt.Printf("%8.1f  sum over %d packages\n\nslowest tests (seconds):\n", total, len(pkgs))
	for i, r := range tests {
		if i == *n {
			break
		}
		fmt.Printf("%8.1f  %-4s %s\n", r.elapsed, r.action, r.name)
	}
}
