package app

import (
	"fmt"
	"slices"
	"strings"
)

// sameClasses checks that an image folder's class folders (names, sorted)
// are the classes want names, in any order: class indices follow want
// (the spec's classNames, or the folders training recorded), and each
// folder is found by its name, so an order other than the sorted one is
// no error. When the two differ it names the classes without a folder and
// the folders that are no class, each list cut at six with the count of
// the rest.
func sameClasses(root string, names, want []string) error {
	var missing, extra []string
	for _, w := range want {
		if !slices.Contains(names, w) {
			missing = append(missing, w)
		}
	}
	for _, n := range names {
		if !slices.Contains(want, n) {
			extra = append(extra, n)
		}
	}
	if len(missing) == 0 && len(extra) == 0 {
		return nil
	}
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, fmt.Sprintf("no folder for the class(es) %s", cutList(missing)))
	}
	if len(extra) > 0 {
		parts = append(parts, fmt.Sprintf("folder(s) %s are no class", cutList(extra)))
	}
	return fmt.Errorf("%s: the class folders are not the classes (the spec's classNames, or the training folders recorded in the weights): %s", root, strings.Join(parts, "; "))
}

// cutList quotes up to six names and says how many more there are.
func cutList(names []string) string {
	const shown = 6
	q := make([]string, 0, shown)
	for _, n := range names[:min(len(names), shown)] {
		q = append(q, fmt.Sprintf("%q", n))
	}
	out := strings.Join(q, ", ")
	if len(names) > shown {
		out += fmt.Sprintf(" and %d more", len(names)-shown)
	}
	return out
}
