// Package mps is the Metal runtime that mlbuild's Metal programs link: typed
// Go wrappers around the Objective-C objects of Metal and
// MetalPerformanceShaders, and an Engine that runs one training step as one
// command buffer (generated compute kernels plus MPSMatrixMultiplication
// GEMMs, one commit, one wait).
//
// Every Objective-C message goes through a Messenger, a small interface with
// two implementations: the system one (darwin only) on
// github.com/ebitengine/purego/objc, so programs build with CGO_ENABLED=0 and
// cross-compile from any OS, and the recording fake in mps/fakemetal, which
// simulates Metal objects on any OS and checks the protocol (buffers alive
// and large enough, encoders ended before commit, one commit and one wait
// per step, nothing released twice).
//
// Selectors and classes are registered once, in selectors.go, through
// registerSel, registerClassSel and registerClass with literal strings that
// name the receiving class or protocol, so a test can check each one against
// the tables of Apple's API in testdata/apple-api.
//
// This package is copied into every generated Metal program's module; besides
// the standard library it imports only purego.
package mps
