package cuda

// SetPartBytes makes splitSource cut parts of about n bytes of kernels
// until restore is called, so tests split small sources.
func SetPartBytes(n int) (restore func()) {
	old := partBytes
	partBytes = n
	return func() { partBytes = old }
}

// SplitSource is splitSource, for the external tests.
var SplitSource = splitSource
