//go:build !purego

package cpu

import (
	"sync"
	"syscall"
)

// Intel AMX: BF16's products on tiles, where the CPU has AMX-BF16 and the
// kernel lets this process use the tile registers (Linux asks a process to
// request them: arch_prctl ARCH_REQ_XCOMP_PERM).
//
// A product C = A·B (m×k times k×n) packs A as bfloat16 rows of kp = k
// rounded up to 32 (pa, mp×kp, mp = m rounded up to 32), B as bfloat16
// pairs along k (pb: kp/2 rows of np pairs, np = n rounded up to 32: the
// layout TDPBF16PS reads), zero-padded, then multiplies 32×32 blocks of C
// into pc (mp×np float32) with amxRowBlock, one 32-row block of C per piece
// of work, and copies pc's m×n corner into C.

var amx struct {
	once sync.Once
	ok   bool
	cfg  [64]byte // the tile configuration: palette 1, tmm0-7 16 rows of 64 bytes
}

func amxSetup() {
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 7 {
		return
	}
	_, _, ecx1, _ := cpuid(1, 0)
	if ecx1&(1<<27) == 0 { // no OSXSAVE: no XGETBV
		return
	}
	_, _, _, edx7 := cpuid(7, 0)
	const amxBF16, amxTile = 1 << 22, 1 << 24
	if edx7&(amxBF16|amxTile) != amxBF16|amxTile {
		return
	}
	xcr0, _ := xgetbv()
	const tileState = 3 << 17 // XTILECFG and XTILEDATA
	if xcr0&tileState != tileState {
		return
	}
	const archReqXcompPerm, xfeatureXtiledata = 0x1023, 18
	if _, _, errno := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archReqXcompPerm, xfeatureXtiledata, 0); errno != 0 {
		return
	}
	amx.cfg[0] = 1 // palette 1
	for t := 0; t < 8; t++ {
		amx.cfg[16+2*t] = 64 // bytes a row
		amx.cfg[48+t] = 16   // rows
	}
	amx.ok = true
}

// BF16Native reports whether BF16 products run on bfloat16 hardware (Intel
// AMX) here; where they don't, they run in float32 on rounded operands.
func BF16Native() bool {
	amx.once.Do(amxSetup)
	return amx.ok
}

//go:noescape
func amxRowBlock(cfg *byte, a *uint16, b *uint32, c *float32, nBlocks, kTiles, lda, ldb, ldc int)

// amxBuffers are the packed operands and the padded product, reused.
var amxBuffers struct {
	sync.Mutex
	pa []uint16
	pb []uint32
	pc []float32
}

// amxGemm is C = A·B on AMX tiles; false where the CPU has none.
func amxGemm(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) bool {
	if k <= 0 || !BF16Native() {
		return false
	}
	checkGemmOperand("c", c, m, n, ldc)
	if transA {
		checkGemmOperand("a", a, k, m, lda)
	} else {
		checkGemmOperand("a", a, m, k, lda)
	}
	if transB {
		checkGemmOperand("b", b, n, k, ldb)
	} else {
		checkGemmOperand("b", b, k, n, ldb)
	}
	mp, np, kp := gemmRoundUp(m, 32), gemmRoundUp(n, 32), gemmRoundUp(k, 32)
	s := &amxBuffers
	s.Lock()
	defer s.Unlock()
	s.pa = growU16(s.pa, mp*kp)
	s.pb = growU32(s.pb, kp/2*np)
	s.pc = growF32(s.pc, mp*np)
	pa, pb, pc := s.pa, s.pb, s.pc
	packBF16A(transA, a, lda, m, k, pa, mp, kp)
	packBF16B(transB, b, ldb, k, n, pb, kp, np)
	ParallelFor(mp/32, 1, func(lo, hi int) {
		for mb := lo; mb < hi; mb++ {
			amxRowBlock(&amx.cfg[0], &pa[mb*32*kp], &pb[0], &pc[mb*32*np], np/32, kp/32, kp*2, np*4, np*4)
		}
	})
	ParallelFor(m, rowGrain(n), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			copy(c[i*ldc:i*ldc+n], pc[i*np:i*np+n])
		}
	})
	return true
}

func growU16(s []uint16, n int) []uint16 {
	if cap(s) < n {
		return make([]uint16, n)
	}
	return s[:n]
}

func growU32(s []uint32, n int) []uint32 {
	if cap(s) < n {
		return make([]uint32, n)
	}
	return s[:n]
}

func growF32(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}
