// Macros shared by rt/cpu's AVX-512 kernels (#include "avx512_amd64.h").

// TAILMASK sets K1 to the low (reg mod 16) lanes, from the count in reg.
// Clobbers AX and CX.
#define TAILMASK(reg) \
	MOVQ reg, CX; \
	ANDQ $15, CX; \
	MOVL $1, AX; \
	SHLL CX, AX; \
	DECL AX; \
	KMOVW AX, K1

// BROADCAST13(table) loads the first thirteen float32s of table into
// Z16–Z28, a value each broadcast to every lane; R8 is left at table.
#define BROADCAST13(table) \
	LEAQ table(SB), R8; \
	VBROADCASTSS 0(R8), Z16; \
	VBROADCASTSS 4(R8), Z17; \
	VBROADCASTSS 8(R8), Z18; \
	VBROADCASTSS 12(R8), Z19; \
	VBROADCASTSS 16(R8), Z20; \
	VBROADCASTSS 20(R8), Z21; \
	VBROADCASTSS 24(R8), Z22; \
	VBROADCASTSS 28(R8), Z23; \
	VBROADCASTSS 32(R8), Z24; \
	VBROADCASTSS 36(R8), Z25; \
	VBROADCASTSS 40(R8), Z26; \
	VBROADCASTSS 44(R8), Z27; \
	VBROADCASTSS 48(R8), Z28
