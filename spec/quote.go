package spec

import (
	"fmt"
	"regexp"
	"strconv"
	"unicode/utf8"
)

// Messages quote what the user wrote (names, op strings, file names,
// numbers) at a readable length: whole up to ShortMax characters, which
// every legal name fits, else the first ShortKeep characters and the
// length. The schema's #Short follows the same rule, so that CUE's own
// messages and mlbuild's agree.
const (
	ShortMax  = 64
	ShortKeep = 40
)

// Short returns s whole when it has at most ShortMax characters, else its
// first ShortKeep characters followed by "… (N characters)". Short of a
// shortened string is the same string.
func Short(s string) string {
	n := utf8.RuneCountInString(s)
	if n <= ShortMax {
		return s
	}
	return string([]rune(s)[:ShortKeep]) + fmt.Sprintf("… (%d characters)", n)
}

// QuoteShort quotes s as strconv.QuoteToASCII does (so that control and
// invisible characters show), keeping only the first ShortKeep characters
// of a string longer than ShortMax: "aaaa…" (10000 characters).
func QuoteShort(s string) string {
	n := utf8.RuneCountInString(s)
	if n <= ShortMax {
		return strconv.QuoteToASCII(s)
	}
	q := strconv.QuoteToASCII(string([]rune(s)[:ShortKeep]))
	return q[:len(q)-1] + fmt.Sprintf("…\" (%d characters)", n)
}

// quotedOrDigits matches a double-quoted string (with Go/CUE escapes) or a
// run of digits: what CUE's own messages quote from a spec.
var quotedOrDigits = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|[0-9]{` + strconv.Itoa(ShortMax+1) + `,}`)

// shortenMessage shortens, in a message written by CUE, every quoted
// string and every number longer than ShortMax characters.
func shortenMessage(msg string) string {
	if len(msg) <= ShortMax {
		return msg
	}
	return quotedOrDigits.ReplaceAllStringFunc(msg, func(m string) string {
		if m[0] != '"' {
			return Short(m)
		}
		if utf8.RuneCountInString(m) <= ShortMax+2 {
			return m
		}
		u, err := strconv.Unquote(m)
		if err != nil {
			return Short(m)
		}
		return QuoteShort(u)
	})
}
