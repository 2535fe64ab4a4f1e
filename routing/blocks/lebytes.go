package blocks

import (
	"encoding/binary"
	"unsafe"

	"github.com/zeebo/xxh3"
)

// littleEndian reports whether this machine stores a uint32 as le_u32, the byte order DESIGN.md §5
// hashes tokens in (amd64 and arm64 do).
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// hashTokensInto is xxh3_64(le_u32(tokens), seed). On a little-endian machine the tokens' own
// memory already is le_u32(tokens), so it is hashed in place; elsewhere it is written into buf
// (grown as needed and returned) first. Why not always putTokens: copying every block's tokens
// into a scratch buffer was a quarter of the request-side hashing time for a 100k-token prompt
// (bench/proxy BenchmarkRequestPath), and the bytes hashed are the same.
func hashTokensInto(buf []byte, tokens []uint32, seed uint64) (uint64, []byte) {
	if littleEndian {
		if len(tokens) == 0 {
			return xxh3.HashSeed(nil, seed), buf
		}
		return xxh3.HashSeed(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(tokens))), 4*len(tokens)), seed), buf
	}
	buf = grow(buf, 4*len(tokens))
	putTokens(buf, tokens)
	return xxh3.HashSeed(buf, seed), buf
}
