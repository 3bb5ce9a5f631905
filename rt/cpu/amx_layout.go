package cpu

// The AMX path's packed operands, in the order its tiles are loaded
// (amx_amd64.go): every tile is 1 KB of consecutive memory, 16 rows of 64
// bytes, and one step along k is the next 1 KB. kp is k rounded up to 32.
//
// A (mp×kp bfloat16) is stored in panels of 16 rows (16·kp bfloat16 each),
// each panel the kp/32 tiles of its rows in k's order: a tile holds 16 rows
// of 32 consecutive k.
//
// B (kp/2 rows of np bfloat16 pairs, the pair of B[2q][j] and B[2q+1][j] with
// the even k in the low half: TDPBF16PS's operand) is stored in panels of
// 16 columns (kp/2·16 pairs each), each panel the kp/32 tiles of its
// columns in k's order: a tile holds 16 pair rows of 16 columns.

// amxAAt is the index in packed A of A(i, p).
func amxAAt(i, p, kp int) int { return (i/16)*16*kp + (p/32)*512 + (i%16)*32 + p%32 }

// amxBAt is the index in packed B of the pair of rows 2q and 2q+1 in column j.
func amxBAt(q, j, kp int) int { return (j/16)*(kp/2)*16 + q*16 + j%16 }
