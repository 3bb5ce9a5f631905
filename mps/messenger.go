package mps

import (
	"errors"
	"fmt"
	"structs"
	"unsafe"
)

// ID is an Objective-C object pointer (id); zero is nil. Class objects are
// IDs too, since class methods are messages sent to them.
type ID uintptr

// SEL is a selector as the Objective-C runtime returns it from
// sel_registerName. Its value means something only to the Messenger that
// registered it.
type SEL uintptr

// Size mirrors MTLSize (three NSUIntegers) and is passed to Metal by value,
// so its layout must stay exactly that of the C struct.
type Size struct {
	_      structs.HostLayout
	Width  uint
	Height uint
	Depth  uint
}

// Messenger carries every Objective-C message this package sends. The
// system implementation (darwin only) sends them through purego/objc; the
// fake in mps/fakemetal simulates Metal so the host code runs on any OS.
//
// Arguments are ID, uint (NSUInteger), bool (BOOL), float64 (double), Size
// (MTLSize by value) or unsafe.Pointer (a pointer the callee reads or, for
// NSError**, writes).
type Messenger interface {
	// GetClass returns the class object named name, or 0 when the runtime
	// knows no such class (its framework is not loaded).
	GetClass(name string) ID
	// RegisterSelector maps a selector string to the runtime's SEL.
	RegisterSelector(name string) SEL
	// Send sends sel to receiver and returns the result as one word: an
	// object, an NSUInteger or enum, a BOOL as 0 or 1, or 0 for void.
	Send(receiver ID, sel SEL, args ...any) uintptr
	// SendPointer is Send for methods that return a C pointer (contents,
	// UTF8String); it keeps the result a pointer so no uintptr round trip
	// hides it from the garbage collector's rules.
	SendPointer(receiver ID, sel SEL, args ...any) unsafe.Pointer
	// DefaultDevice calls the C function MTLCreateSystemDefaultDevice. It
	// returns an error wrapping ErrNoDevice when there is none.
	DefaultDevice() (ID, error)
}

// ErrNoDevice is wrapped by every error that means "this machine cannot run
// Metal", so a program can tell it apart from a bug and suggest the CPU
// backend.
var ErrNoDevice = errors.New("no Metal device: this program was built for an Apple GPU (macOS on Apple silicon); rebuild it with --backend cpu to run on this machine")

// selector is one Objective-C selector this package sends, with the class or
// protocol that receives it. The receiver is documentation for readers and
// the key of the API table test (apitable_test.go), which looks the pair up
// in testdata/apple-api; classMethod says the receiver is a class object.
type selector struct {
	receiver    string
	name        string
	classMethod bool
	index       int
}

// className is one Objective-C class this package looks up by name.
type className struct {
	name  string
	index int
}

var (
	registeredSelectors []*selector
	registeredClasses   []*className
)

// registerSel declares the instance method name of class or protocol
// receiver. Call it only in a package-level var with literal strings: the
// API table test reads those calls from the source.
func registerSel(receiver, name string) *selector {
	s := &selector{receiver: receiver, name: name, index: len(registeredSelectors)}
	registeredSelectors = append(registeredSelectors, s)
	return s
}

// registerClassSel declares the class method name of class receiver.
func registerClassSel(receiver, name string) *selector {
	s := registerSel(receiver, name)
	s.classMethod = true
	return s
}

// registerClass declares a class that this package looks up by name.
func registerClass(name string) *className {
	c := &className{name: name, index: len(registeredClasses)}
	registeredClasses = append(registeredClasses, c)
	return c
}

// bridge is a Messenger with every registered selector and class resolved
// once, so sending a message costs no lookup by name.
type bridge struct {
	m       Messenger
	sels    []SEL
	classes []ID
}

// newBridge resolves every registered selector and class through m. A class
// the runtime does not know is an error naming it: its framework is missing.
func newBridge(m Messenger) (*bridge, error) {
	b := &bridge{m: m, sels: make([]SEL, len(registeredSelectors)), classes: make([]ID, len(registeredClasses))}
	for _, s := range registeredSelectors {
		b.sels[s.index] = m.RegisterSelector(s.name)
	}
	for _, c := range registeredClasses {
		id := m.GetClass(c.name)
		if id == 0 {
			return nil, fmt.Errorf("mps: the Objective-C runtime has no class %s (is MetalPerformanceShaders.framework loaded?): %w", c.name, ErrNoDevice)
		}
		b.classes[c.index] = id
	}
	return b, nil
}

// send sends s to receiver with args.
func (b *bridge) send(receiver ID, s *selector, args ...any) uintptr {
	return b.m.Send(receiver, b.sels[s.index], args...)
}

// sendPointer sends s to receiver and returns the C pointer it answers.
func (b *bridge) sendPointer(receiver ID, s *selector, args ...any) unsafe.Pointer {
	return b.m.SendPointer(receiver, b.sels[s.index], args...)
}

// class returns the resolved class object of c.
func (b *bridge) class(c *className) ID {
	return b.classes[c.index]
}
