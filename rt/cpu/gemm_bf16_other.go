//go:build !amd64 || purego

package cpu

// bf16Path is the AVX512-BF16 path, which only amd64 has: BF16 runs on
// rounded copies here (sgemmBF16).
func bf16Path() *gemmPath { return nil }
