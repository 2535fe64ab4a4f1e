package sim

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/kvevents/codec"
)

// noneHash is the parent of a chain's first block: vLLM's NONE_HASH, the hash of a fixed seed
// string (vllm/v1/core/kv_cache_utils.py init_none_hash with PYTHONHASHSEED set).
var noneHash = func() kv.EngineHash {
	s := sha256.Sum256([]byte("kvroute-sim NONE_HASH"))
	return kv.EngineHash(binary.BigEndian.Uint64(s[24:]))
}()

// EngineBlockHash is the simulator's engine block hash of one complete block, chained like vLLM's
// hash_block_tokens (vllm/v1/core/kv_cache_utils.py): SHA-256 over the parent's hash (noneHash for
// the first block of a prompt), the block's token ids and its extra keys, and the last 8 bytes
// read big-endian, as vLLM turns an ExternalBlockHash into an int event hash. It is published as a
// signed int64 (bitwise). tokens and keys are only read.
func EngineBlockHash(parent kv.EngineHash, hasParent bool, tokens []uint32, keys []codec.ExtraKey) kv.EngineHash {
	if !hasParent {
		parent = noneHash
	}
	h := sha256.New()
	buf := make([]byte, 0, 16+4*len(tokens))
	buf = binary.LittleEndian.AppendUint64(buf, uint64(parent))
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(tokens)))
	for _, t := range tokens {
		buf = binary.LittleEndian.AppendUint32(buf, t)
	}
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(keys)))
	for _, k := range keys {
		buf = append(buf, byte(k.Kind))
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(k.Str)))
		buf = append(buf, k.Str...)
		buf = binary.LittleEndian.AppendUint64(buf, uint64(k.Offset))
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(k.Raw)))
		buf = append(buf, k.Raw...)
	}
	_, _ = h.Write(buf)
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return kv.EngineHash(binary.BigEndian.Uint64(sum[24:]))
}
