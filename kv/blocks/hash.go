package blocks

import (
	"encoding/binary"
	"slices"

	"github.com/kvroute/kvroute/kv"

	"github.com/zeebo/xxh3"
)

// BaseSeed is Dynamo's CHAIN_XXH3_SEED: the XXH3-64 seed of every block hash and of the sequence hash
// chain (ai-dynamo lib/kv-hashing/src/salt.rs, lib/kv-router/src/protocols.rs).
const BaseSeed uint64 = 1337

// PadShift is SGLang's MM_PAD_SHIFT_VALUE: pad values are PadShift plus the low 30 bits of an identity.
const PadShift = 1_000_000

// LoRATerm is the seed addend of a LoRA adapter name: xxh3_64(utf8(name), seed 0), or 0 for "" (absent).
func LoRATerm(name string) uint64 {
	if name == "" {
		return 0
	}
	return xxh3.HashStringSeed(name, 0)
}

// SaltTerm is the seed addend of a cache salt: xxh3_64(utf8(salt), seed 1), or 0 for "" (absent).
func SaltTerm(salt string) uint64 {
	if salt == "" {
		return 0
	}
	return xxh3.HashStringSeed(salt, 1)
}

// SeedFor is the block hash seed of a request or a stored chain: BaseSeed + LoRATerm(loraName) +
// SaltTerm(cacheSalt), with wrapping uint64 additions; empty strings count as absent (Dynamo
// compute_salt_hash, lib/kv-hashing/src/salt.rs).
func SeedFor(loraName, cacheSalt string) uint64 {
	return BaseSeed + LoRATerm(loraName) + SaltTerm(cacheSalt)
}

// PadValue is the token that stands for one media item's placeholders in normalized blocks:
// 1_000_000 + (identity & 0x3FFF_FFFF) (Dynamo pad_value_for_mm_hash; SGLang set_pad_value).
func PadValue(identity kv.Identity) uint32 {
	return PadShift + uint32(identity&0x3FFF_FFFF)
}

// HashTokens is the plain LocalBlockHash of a block: xxh3_64(le_u32(tokens), seed). tokens is only
// read.
func HashTokens(tokens []uint32, seed uint64) kv.BlockHash {
	sum, _ := hashTokensInto(nil, tokens, seed)
	return kv.BlockHash(sum)
}

// HashBoundary is the boundary LocalBlockHash of a block: xxh3_64(le_u32(tokens) ‖ u64le(h) for h in
// identities sorted as unsigned integers, duplicates kept, seed). With no identities it equals
// HashTokens. Neither argument is modified.
func HashBoundary(tokens []uint32, identities []kv.Identity, seed uint64) kv.BlockHash {
	buf := make([]byte, 4*len(tokens)+8*len(identities))
	putTokens(buf, tokens)
	putSortedIdentities(buf[4*len(tokens):], identities, nil)
	return kv.BlockHash(xxh3.HashSeed(buf, seed))
}

// SequenceHashes chains local block hashes for load tracking: seq[0] = local[0], seq[i] =
// xxh3_64(u64le(seq[i-1]) ‖ u64le(local[i]), BaseSeed) (Dynamo compute_seq_hash_for_block). The result
// is a new slice of len(local). A sequence hash is neither kind of wire hash (it depends on every
// block before it), so it stays a bare uint64.
func SequenceHashes(local []kv.BlockHash) []uint64 {
	out := make([]uint64, len(local))
	var buf [16]byte
	for i, h := range local {
		if i == 0 {
			out[0] = uint64(h)
			continue
		}
		binary.LittleEndian.PutUint64(buf[:8], out[i-1])
		binary.LittleEndian.PutUint64(buf[8:], uint64(h))
		out[i] = xxh3.HashSeed(buf[:], BaseSeed)
	}
	return out
}

func putTokens(dst []byte, tokens []uint32) {
	for i, t := range tokens {
		binary.LittleEndian.PutUint32(dst[4*i:], t)
	}
}

// putSortedIdentities writes identities sorted unsigned as u64le into dst, using scratch (grown as
// needed and returned) for the sort so the caller's slice is not reordered.
func putSortedIdentities(dst []byte, identities []kv.Identity, scratch []kv.Identity) []kv.Identity {
	scratch = append(scratch[:0], identities...)
	slices.Sort(scratch)
	for i, h := range scratch {
		binary.LittleEndian.PutUint64(dst[8*i:], uint64(h))
	}
	return scratch
}
