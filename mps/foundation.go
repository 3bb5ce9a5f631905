package mps

import (
	"fmt"
	"unsafe"
)

// nsUTF8StringEncoding is NSUTF8StringEncoding.
const nsUTF8StringEncoding = 4

// newNSString makes an NSString holding s. The caller owns it (+1) and
// releases it when done; no autorelease pool is involved.
// https://developer.apple.com/documentation/foundation/nsstring/1407339-initwithbytes?language=objc
func (b *bridge) newNSString(s string) ID {
	obj := ID(b.send(b.class(classNSString), selAlloc))
	var p unsafe.Pointer
	if len(s) > 0 {
		p = unsafe.Pointer(unsafe.StringData(s))
	}
	return ID(b.send(obj, selInitWithBytesLengthEncode, p, uint(len(s)), uint(nsUTF8StringEncoding)))
}

// goString copies the characters of an NSString into a Go string; nil is "".
// https://developer.apple.com/documentation/foundation/nsstring/1411189-utf8string?language=objc
func (b *bridge) goString(nsString ID) string {
	if nsString == 0 {
		return ""
	}
	p := b.sendPointer(nsString, selUTF8String)
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(p, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(p), n))
}

// nsError turns an NSError into a Go error whose text says where (context)
// and what Metal said. nil gives a generic message, so a failure that left
// no NSError still reads as one.
// https://developer.apple.com/documentation/foundation/nserror/1414418-localizeddescription?language=objc
func (b *bridge) nsError(nsError ID, context string) error {
	if nsError == 0 {
		return fmt.Errorf("%s: failed without an NSError", context)
	}
	return fmt.Errorf("%s: %s", context, b.goString(ID(b.send(nsError, selLocalizedDescription))))
}

// retain sends retain: the caller takes a reference it must release.
// https://developer.apple.com/documentation/objectivec/1418956-nsobject/1571946-retain?language=objc
func (b *bridge) retain(obj ID) {
	if obj != 0 {
		b.send(obj, selRetain)
	}
}

// release sends release, giving back one reference.
// https://developer.apple.com/documentation/objectivec/1418956-nsobject/1571957-release?language=objc
func (b *bridge) release(obj ID) {
	if obj != 0 {
		b.send(obj, selRelease)
	}
}

// AutoreleasePool is an NSAutoreleasePool: objects Metal hands back
// autoreleased (command buffers, encoders, descriptors, errors) are freed
// when it drains. A pool belongs to one OS thread, so its user locks the
// goroutine to its thread between NewAutoreleasePool and Drain.
type AutoreleasePool struct {
	b  *bridge
	id ID
}

// NewAutoreleasePool pushes a new pool onto the current thread's stack.
// https://developer.apple.com/documentation/foundation/nsautoreleasepool?language=objc
func (d Device) NewAutoreleasePool() AutoreleasePool {
	return AutoreleasePool{b: d.b, id: ID(d.b.send(d.b.class(classNSAutoreleasePool), selNew))}
}

// Drain releases the pool's objects and the pool itself.
// https://developer.apple.com/documentation/foundation/nsautoreleasepool/1520553-drain?language=objc
func (p AutoreleasePool) Drain() {
	p.b.send(p.id, selDrain)
}
