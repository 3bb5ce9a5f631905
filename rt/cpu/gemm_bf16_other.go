//go:build !amd64 || purego

package cpu

// bf16GemmPath is the AVX512-BF16 path, which only amd64 has: BF16 runs on
// rounded copies here (sgemmBF16).
var bf16GemmPath *gemmPath
