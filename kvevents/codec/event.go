package codec

import (
	"errors"
	"fmt"

	"github.com/kvroute/kvroute/kv"
)

// ErrMalformed is wrapped by every error about bytes that are not one well-formed batch.
var ErrMalformed = errors.New("malformed kv event batch")

// errTruncated is the cause of ErrMalformed for input that ends inside a value.
var errTruncated = fmt.Errorf("truncated input: %w", ErrMalformed)

// errUnknownType marks an event whose tag is not one of the three types; it is skipped and counted.
var errUnknownType = errors.New("unknown event type")

// Encoding names a batch wire format, as in the Kvroute-Encoding NATS header (DESIGN.md §2.2).
type Encoding string

// The four encodings of DESIGN.md §2.2.
const (
	VLLM          Encoding = "vllm"
	SGLang        Encoding = "sglang"
	DynamoJSON    Encoding = "dynamo-json"
	DynamoMsgpack Encoding = "dynamo-msgpack"
)

// ParseEncoding checks a Kvroute-Encoding value.
func ParseEncoding(s string) (Encoding, error) {
	switch e := Encoding(s); e {
	case VLLM, SGLang, DynamoJSON, DynamoMsgpack:
		return e, nil
	}
	return "", fmt.Errorf("parsing encoding %q: want vllm, sglang, dynamo-json or dynamo-msgpack", s)
}

// Type is an event's kind.
type Type uint8

// The three event types every engine publishes.
const (
	BlockStored Type = iota + 1
	BlockRemoved
	AllBlocksCleared
)

// String is the engine's tag: "BlockStored", "BlockRemoved", "AllBlocksCleared".
func (t Type) String() string {
	switch t {
	case BlockStored:
		return "BlockStored"
	case BlockRemoved:
		return "BlockRemoved"
	case AllBlocksCleared:
		return "AllBlocksCleared"
	}
	return "Unknown"
}

// KeyKind is the shape of one extra_keys item.
type KeyKind uint8

const (
	// KeyString is a bare string (a LoRA name, an older-vLLM media identifier, or a cache salt).
	KeyString KeyKind = iota + 1
	// KeyPair is [identifier, offset] (vLLM ≥ PR #36708): offset = placeholder offset − block start.
	KeyPair
	// KeyOther is any other item (int, float, bool, bytes, nil, other arrays), kept as raw msgpack.
	KeyOther
)

// ExtraKey is one item of a stored block's extra_keys.
type ExtraKey struct {
	Kind   KeyKind
	Str    string // KeyString, or a KeyPair's identifier
	Offset int64  // KeyPair
	Raw    []byte // KeyOther: the item's msgpack bytes (JSON text for Dynamo input is not used)
}

// Event is one decoded KV event. Engine block hashes are kv.EngineHash (u64): signed msgpack ints
// are reinterpreted bitwise, byte-string hashes keep their last 8 bytes big-endian (vLLM
// ExternalBlockHash → int).
type Event struct {
	Type Type
	// BlockHashes are the engine's hashes of the stored or removed blocks, in chain order.
	BlockHashes []kv.EngineHash
	// Parent is the engine hash of the block before BlockHashes[0]; HasParent is false for null.
	Parent    kv.EngineHash
	HasParent bool
	// TokenIDs are the stored blocks' tokens (len(BlockHashes)*BlockSize for complete blocks).
	TokenIDs  []uint32
	BlockSize int
	// LoRAID is vLLM's deprecated lora_id (HasLoRAID false for null).
	LoRAID    int64
	HasLoRAID bool
	// Medium is the cache tier ("GPU", "CPU", …); HasMedium false for null.
	Medium    string
	HasMedium bool
	// LoRAName is the adapter name; HasLoRAName false for null.
	LoRAName    string
	HasLoRAName bool
	// ExtraKeys has one entry per stored block (nil for a null entry); HasExtraKeys is false when the
	// field is absent or null (vLLM before per-block extra keys).
	ExtraKeys    [][]ExtraKey
	HasExtraKeys bool
	// GroupIdx is newer vLLM's KV cache group (0 for single-group models); HasGroupIdx false if absent.
	GroupIdx    int64
	HasGroupIdx bool
	// SpecKind is newer vLLM's kv_cache_spec_kind, the kind of the event's KV cache group
	// ("full_attention", "mamba", "sliding_window", …; vllm/v1/kv_cache_interface.py); HasSpecKind
	// false if absent or null. kvevents/normalize decides from it (and GroupIdx) whether the event's
	// blocks line up with the prompt. The other fields newer vLLM adds (kv_cache_spec_sliding_window,
	// locality, ownership, session_id) and unknown keys are read past in both encodings.
	SpecKind    string
	HasSpecKind bool

	// LocalHashes are the publisher's own LocalBlockHash per block (Dynamo tokens_hash, the hash
	// kv/blocks computes); nil otherwise.
	LocalHashes []kv.BlockHash
	// WorkerID and EventID are Dynamo RouterEvent fields (0 for engine batches).
	WorkerID, EventID uint64
	// DPRank is the event's data-parallel rank for Dynamo events; engine batches carry it on the Batch.
	DPRank int64
}

// Batch is one decoded batch.
type Batch struct {
	// TS is the engine's timestamp in seconds since the epoch (0 for Dynamo).
	TS float64
	// DPRank is the batch's data_parallel_rank; HasDPRank is false when absent or null.
	DPRank    int64
	HasDPRank bool
	// Events are the decoded events of known types, in order.
	Events []Event
	// Unknown counts events of unknown types, skipped.
	Unknown int
	// Malformed counts events of a known type whose fields had the wrong shape, skipped; FirstErr is
	// the first such error.
	Malformed int
	FirstErr  error
}

func (b *Batch) skip(err error) {
	if errors.Is(err, errUnknownType) {
		b.Unknown++
		return
	}
	b.Malformed++
	if b.FirstErr == nil {
		b.FirstErr = err
	}
}
