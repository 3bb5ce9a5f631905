package mps

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/ebitengine/purego/objc"
)

// Framework binaries loaded by SystemMessenger. CoreGraphics is loaded
// because MTLCreateSystemDefaultDevice returns nil in a command-line
// program that has not linked it.
const (
	metalFramework         = "/System/Library/Frameworks/Metal.framework/Metal"
	mpsFramework           = "/System/Library/Frameworks/MetalPerformanceShaders.framework/MetalPerformanceShaders"
	coreGraphicsFramework  = "/System/Library/Frameworks/CoreGraphics.framework/CoreGraphics"
	createDefaultDeviceSym = "MTLCreateSystemDefaultDevice"
)

// systemMessenger sends real Objective-C messages through purego/objc.
type systemMessenger struct {
	createSystemDefaultDevice func() uintptr
}

var (
	systemOnce sync.Once
	system     *systemMessenger
	systemErr  error
)

// SystemMessenger loads Metal, MetalPerformanceShaders and CoreGraphics
// with dlopen (no cgo) and returns the Messenger that talks to the real
// Objective-C runtime. Loading happens once per process.
func SystemMessenger() (Messenger, error) {
	systemOnce.Do(func() {
		var metal uintptr
		for _, path := range []string{metalFramework, mpsFramework, coreGraphicsFramework} {
			h, err := purego.Dlopen(path, purego.RTLD_LAZY|purego.RTLD_GLOBAL)
			if err != nil {
				systemErr = fmt.Errorf("mps: loading %s: %v: %w", path, err, ErrNoDevice)
				return
			}
			if path == metalFramework {
				metal = h
			}
		}
		sym, err := purego.Dlsym(metal, createDefaultDeviceSym)
		if err != nil {
			systemErr = fmt.Errorf("mps: %s not found in %s: %v: %w", createDefaultDeviceSym, metalFramework, err, ErrNoDevice)
			return
		}
		m := &systemMessenger{}
		purego.RegisterFunc(&m.createSystemDefaultDevice, sym)
		system = m
	})
	if systemErr != nil {
		return nil, systemErr
	}
	return system, nil
}

// GetClass is objc_getClass.
func (*systemMessenger) GetClass(name string) ID { return ID(objc.GetClass(name)) }

// RegisterSelector is sel_registerName.
func (*systemMessenger) RegisterSelector(name string) SEL { return SEL(objc.RegisterName(name)) }

// Send is objc_msgSend returning one word.
func (*systemMessenger) Send(receiver ID, sel SEL, args ...any) uintptr {
	return uintptr(objc.ID(receiver).Send(objc.SEL(sel), args...))
}

// SendPointer is objc_msgSend returning a C pointer.
func (*systemMessenger) SendPointer(receiver ID, sel SEL, args ...any) unsafe.Pointer {
	return objc.Send[unsafe.Pointer](objc.ID(receiver), objc.SEL(sel), args...)
}

// DefaultDevice calls MTLCreateSystemDefaultDevice.
func (m *systemMessenger) DefaultDevice() (ID, error) {
	id := ID(m.createSystemDefaultDevice())
	if id == 0 {
		return 0, fmt.Errorf("mps: MTLCreateSystemDefaultDevice returned nil: %w", ErrNoDevice)
	}
	return id, nil
}
