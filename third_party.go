package mlbuild

import _ "embed"

// PuregoZip is github.com/ebitengine/purego v0.11.3 exactly as the Go
// module proxy serves it (the module zip; its h1 hash is the one in
// mlbuild's go.sum, which emit's tests check). Programs that drive a GPU
// import purego; the emitter vendors the packages they need from this zip,
// so they build offline with an empty module cache.
//
//go:embed third_party/purego/purego-v0.11.3.zip
var PuregoZip []byte
