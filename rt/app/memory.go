package app

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/mlbuild/mlbuild/rt/cpu"
)

// MemoryEnv names the environment variable that gives the memory check the
// bytes available when the program starts, in place of what it reads from
// the machine; the arenas made since are taken off it. It is for tests (a
// refusal is tested with a small figure on any machine), and lets a user
// who knows better (swap, memory about to be freed) run anyway.
const MemoryEnv = "MLBUILD_MEMORY_AVAILABLE"

// allocated counts the bytes of the arenas Allocate has made.
var allocated int64

// Arena is one block of a program's memory, sized by its plan and made by
// Allocate the first time a phase needs it.
type Arena struct {
	Name string     // for messages: "state", "training work"
	Size int        // float32 elements
	Data *[]float32 // the variable Allocate fills; made only while nil
}

// MemoryError is the refusal to allocate a phase's arenas when the machine
// has less memory available than they need. Allocate panics with it, since
// the app.Model methods that first touch a phase cannot return an error;
// Run turns it into its message and exit code 1.
type MemoryError struct{ Msg string }

func (e *MemoryError) Error() string { return e.Msg }

// Allocate makes the arenas of one phase ("training", "inference") that
// are not made yet, after checking that the machine has the
// memory they need, so that a model too large for it stops with what it
// needs, what there is and what to change, before its first step, rather
// than with the kernel's OOM killer in the middle of one. The memory is
// Go's (cpu.Floats: huge pages where Linux gives them): pages the
// operating system hands out zeroed as they are touched.
// batch is the phase's plan's batch (0 for the state alone): above 1 the
// refusal suggests a smaller one.
func Allocate(meta *Meta, phase string, batch int, arenas ...Arena) {
	var parts []MemoryPart
	for _, a := range arenas {
		if *a.Data == nil {
			parts = append(parts, MemoryPart{a.Name, 4 * int64(a.Size)})
		}
	}
	if avail, source, ok := AvailableMemory(); ok {
		if err := CheckMemory(meta, phase, batch, parts, avail, source); err != nil {
			panic(err)
		}
	}
	for _, a := range arenas {
		if *a.Data == nil {
			// The generated programs name their state arena "state".
			if a.Name == "state" && stateImage != nil {
				if s := mapState(stateImage, a.Size); s != nil {
					*a.Data, mappedState = s, s
					allocated += 4 * int64(a.Size)
					continue
				}
			}
			*a.Data = cpu.Floats(a.Size)
			allocated += 4 * int64(a.Size)
		}
	}
}

// stateImage, while set (by mapEmbedded), is the start of the state arena
// as the embedded weights lay it out: Allocate then maps the state arena
// with them in it (mapState) instead of making it zero. mappedState is the
// arena so made.
var stateImage []byte
var mappedState []float32

// MemoryPart is one arena's share of what a phase needs, for CheckMemory.
type MemoryPart struct {
	Name  string
	Bytes int64
}

// CheckMemory returns the refusal (a *MemoryError) of a phase whose arenas
// (parts) need more than the avail bytes that source reports, or nil when
// they fit. The message says what the phase needs, arena by arena, what
// there is, and what to change: a smaller batch when the phase's plan has
// one above 1 (batch; 0 for the state alone), else a larger machine.
func CheckMemory(meta *Meta, phase string, batch int, parts []MemoryPart, avail int64, source string) error {
	var need int64
	var names []string
	for _, p := range parts {
		if p.Bytes > 0 {
			need += p.Bytes
			names = append(names, fmt.Sprintf("%s %s", p.Name, bytesString(p.Bytes)))
		}
	}
	if need <= avail {
		return nil
	}
	fix := "free memory or run it on a machine with more"
	if batch > 1 {
		fix = fmt.Sprintf("compile %s again with a smaller training.batchSize (now %d): the work arenas grow with it; or %s", meta.SpecFile, batch, fix)
	}
	return &MemoryError{fmt.Sprintf("not enough memory for %s: it needs %d bytes (%s: %s) but %d bytes (%s) are available (%s); %s",
		phase, need, bytesString(need), strings.Join(names, ", "), avail, bytesString(avail), source, fix)}
}

// AvailableMemory is the memory a program may still allocate, the least of
// what the machine and its limits allow, and where that figure comes from;
// ok is false where it cannot be found out (then nothing is refused).
// MemoryEnv overrides it. The machine's figure needs no correction for the
// arenas already made: their pages count once the weights are written.
func AvailableMemory() (bytes int64, source string, ok bool) {
	if s := strings.TrimSpace(os.Getenv(MemoryEnv)); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err == nil && n >= 0 {
			return max(n-allocated, 0), MemoryEnv + " less the arenas made", true
		}
	}
	return systemMemory()
}

// lessMemory keeps the smaller of two figures and its source.
func lessMemory(bytes int64, source string, ok bool, b int64, src string) (int64, string, bool) {
	if !ok || b < bytes {
		return max(b, 0), src, true
	}
	return bytes, source, ok
}
