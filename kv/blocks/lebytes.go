package blocks

import (
	"encoding/binary"
	"unsafe"

	"github.com/kvroute/kvroute/kv"

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
	if len(tokens) == 16 {
		return hashBlock16((*[16]uint32)(tokens), seed), buf
	}
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

// hashPlainBlocks writes the Plain LocalBlockHash of each complete block of tokens (block size bs)
// into out (len(out) blocks): out[b] = xxh3_64(le_u32(tokens[b*bs:(b+1)*bs]), seed), the same value
// as Hasher.Block with no identities. 16-token blocks go through hashBlock16; other sizes, on a
// little-endian machine, are hashed in place as hashTokensInto does; buf (grown as needed and
// returned) is the scratch elsewhere.
func hashPlainBlocks(out []kv.BlockHash, tokens []uint32, bs int, seed uint64, buf []byte) []byte {
	if bs == 16 {
		for b := range out {
			out[b] = kv.BlockHash(hashBlock16((*[16]uint32)(tokens[16*b:16*b+16]), seed))
		}
		return buf
	}
	if !littleEndian {
		for b := range out {
			var sum uint64
			sum, buf = hashTokensInto(buf, tokens[b*bs:(b+1)*bs], seed)
			out[b] = kv.BlockHash(sum)
		}
		return buf
	}
	if len(out) == 0 {
		return buf
	}
	n := 4 * bs
	all := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(tokens))), 4*len(out)*bs)
	for b := range out {
		out[b] = kv.BlockHash(xxh3.HashSeed(all[b*n:(b+1)*n:(b+1)*n], seed))
	}
	return buf
}
