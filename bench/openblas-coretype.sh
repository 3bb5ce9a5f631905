# openblas-coretype.sh is sourced by the benchmark scripts. OpenBLAS built
# with DYNAMIC_ARCH (Debian's) picks its kernels from the CPU's cpuid family
# and model, and on a virtual machine that reports a generic "Intel Xeon
# Processor" it falls back to Prescott, SSE3 kernels: on the project's
# AVX-512 machine cblas_sgemm ran at 29-34 GFLOP/s instead of 135-173, and
# so did PyTorch's linear layers, which call it. OPENBLAS_CORETYPE names the
# kernels to use; it is set from the CPU's own feature flags unless the
# caller set it, and printed, so that OpenBLAS and PyTorch run at their best.
if [ -z "${OPENBLAS_CORETYPE:-}" ] && [ -r /proc/cpuinfo ]; then
	cpuflags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
	has() { case "$cpuflags" in *" $1 "*) return 0 ;; esac; return 1; }
	if has avx512f && has avx512dq && has avx512bw && has avx512vl; then
		OPENBLAS_CORETYPE=SKYLAKEX
	elif has avx2 && has fma; then
		OPENBLAS_CORETYPE=HASWELL
	fi
	if [ -n "${OPENBLAS_CORETYPE:-}" ]; then
		export OPENBLAS_CORETYPE
	fi
fi
echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset (OpenBLAS's own detection)}"
