package blocks

import "math/bits"

// hashBlock16 is xxh3_64(le_u32(tokens), seed) for a block of exactly 16 tokens (64 bytes: vLLM's
// default block_size), written out from the XXH3 17–128-byte rule (xxHash's xxhash.h
// XXH3_len_17to128_64b, v0.8) with the words read from the tokens themselves: the little-endian
// u64 at byte 8k of le_u32(tokens) is tokens[2k] | tokens[2k+1]<<32 on any machine.
//
// Why our own: the router hashes every 16-token block of a prompt (about 6 000 for a 100k-token
// conversation) on each request, and a call into the general xxh3.HashSeed (length dispatch, not
// inlined) cost about as much as the hash itself. TestHashBlock16MatchesXXH3 compares it with
// zeebo/xxh3 on random blocks and seeds.
func hashBlock16(t *[16]uint32, seed uint64) uint64 {
	w := func(k int) uint64 { return uint64(t[2*k]) | uint64(t[2*k+1])<<32 }
	acc := xxh3Len64 // len · PRIME64_1, wrapped
	acc += mulFold64(w(2)^(xxh3Key032+seed), w(3)^(xxh3Key040-seed))
	acc += mulFold64(w(4)^(xxh3Key048+seed), w(5)^(xxh3Key056-seed))
	acc += mulFold64(w(0)^(xxh3Key000+seed), w(1)^(xxh3Key008-seed))
	acc += mulFold64(w(6)^(xxh3Key016+seed), w(7)^(xxh3Key024-seed))
	acc ^= acc >> 37 // XXH3_avalanche
	acc *= 0x165667919e3779f9
	return acc ^ acc>>32
}

// The XXH3 constants hashBlock16 reads: 64·PRIME64_1 and the first 64 bytes of XXH3_kSecret as
// little-endian u64 words (xxhash.h v0.8).
const (
	xxh3Len64  uint64 = 64 * 11400714785074694791 % (1 << 64) // 64 · PRIME64_1 mod 2⁶⁴
	xxh3Key000 uint64 = 0xbe4ba423396cfeb8
	xxh3Key008 uint64 = 0x1cad21f72c81017c
	xxh3Key016 uint64 = 0xdb979083e96dd4de
	xxh3Key024 uint64 = 0x1f67b3b7a4a44072
	xxh3Key032 uint64 = 0x78e5c0cc4ee679cb
	xxh3Key040 uint64 = 0x2172ffcc7dd05a82
	xxh3Key048 uint64 = 0x8e2443f7744608b8
	xxh3Key056 uint64 = 0x4c263a81e69035e0
)

// mulFold64 is XXH3_mul128_fold64: the 128-bit product of x and y, high half XOR low half.
func mulFold64(x, y uint64) uint64 {
	hi, lo := bits.Mul64(x, y)
	return hi ^ lo
}
