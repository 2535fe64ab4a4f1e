package normalize

import (
	"errors"
	"fmt"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/kvevents/codec"
)

// ErrEvent is wrapped by errors about an event that decodes but cannot be normalized (block size or
// token count that does not fit, extra_keys of the wrong length); such events are skipped and counted.
var ErrEvent = errors.New("event cannot be normalized")

// Config configures a Normalizer.
type Config struct {
	// Blocks is the model's block rule: block size and pad ids (from its config.json).
	Blocks blocks.Config
	// Encoding says how the publisher marks media: vllm (extra_keys), sglang (pad values already in
	// token_ids), dynamo-json / dynamo-msgpack (tokens_hash given).
	Encoding codec.Encoding
	// MaxSaltedBlocks bounds the engine hash → cache salt memory used to salt later blocks of a salted
	// chain; the oldest entries are forgotten first. Default: DefaultMaxSaltedBlocks.
	MaxSaltedBlocks int
	// AnyBlockSize indexes every dense BlockStored at its own block_size instead of skipping the ones
	// whose block_size is not Blocks.BlockSize (BlockSizeMismatch); Blocks.BlockSize may then be 0.
	// For inspecting a stream (`kvroute events` without --block-size), never for routing: the request
	// side hashes at the worker's one block size.
	AnyBlockSize bool
}

// DefaultConfig is the configuration for the Qwen3-VL test model's vLLM workers: block size 16,
// image pad 151655, video pad 151656, vllm encoding, DefaultMaxSaltedBlocks.
func DefaultConfig() Config {
	return Config{
		Blocks:          blocks.Config{BlockSize: 16, ImagePad: 151655, VideoPad: 151656},
		Encoding:        codec.VLLM,
		MaxSaltedBlocks: DefaultMaxSaltedBlocks,
	}
}

// DefaultMaxSaltedBlocks is the default Config.MaxSaltedBlocks (16 bytes each, plus map overhead).
const DefaultMaxSaltedBlocks = 1 << 18

// Stored is the index entry of one stored block.
type Stored struct {
	EngineHash kv.EngineHash
	// ParentEngineHash is the engine hash of the previous block of the chain; HasParent is false for
	// the first block of a chain.
	ParentEngineHash kv.EngineHash
	HasParent        bool
	// LocalHash is the block's LocalBlockHash, computed here (or taken from Dynamo tokens_hash).
	LocalHash kv.BlockHash
	Kind      blocks.Kind
	// Identities are the media identities read from the block's extra_keys, in order.
	Identities []kv.Identity
}

// Op is one normalized event.
type Op struct {
	Type    codec.Type
	Stored  []Stored        // BlockStored
	Removed []kv.EngineHash // BlockRemoved
	// Medium is the event's cache tier ("" when absent); WorkerID and DPRank are set for Dynamo events.
	Medium   string
	WorkerID uint64
	DPRank   int64
}

// Result is one normalized batch.
type Result struct {
	// Ops are the batch's events in order (apply them in this order).
	Ops []Op
	// Ignored counts BlockStored events of another tier than GPU that carry no tokens (vLLM CPU
	// offloading announces copies of blocks it already stored on the GPU this way): dropped quietly.
	Ignored int
	// Skipped counts events that could not be normalized; FirstErr is the first reason (wraps ErrEvent).
	Skipped  int
	FirstErr error
	// Filtered lists the events kept out of the index by the KV cache group rule, the dense check or
	// the block size check, in order. They change nothing (a filtered BlockRemoved removes nothing).
	Filtered []Filtered
}

// Filtered is one event of a batch that is not indexed, and why.
type Filtered struct {
	// Event is the event's position in the batch.
	Event  int
	Reason SkipReason
}

// Normalizer normalizes the batches of ONE worker and data-parallel rank, in sequence order: it keeps
// the cache salt of salted chains so that a chain continued in a later event gets the same seed, and
// the kind each KV cache group learned (the group rule of hybrid models, see SkipReason). It is not
// safe for concurrent use.
type Normalizer struct {
	cfg    Config
	h      *blocks.Hasher
	groups GroupFilter              // learned kinds of the stream's KV cache groups
	salts  map[kv.EngineHash]uint64 // engine hash → salt term of its chain (salted chains only)
	ring   []kv.EngineHash          // insertion order of salts keys, for the bound
	next   int                      // next ring slot to overwrite
	ids    []kv.Identity            // scratch: the identities of an event's blocks, back to back
	idEnd  []int                    // scratch: end of each block's identities in ids

	// The last identity string parsed (extra_keys repeat one identifier across a media item's blocks;
	// kvevents/codec shares the string's bytes, so the comparison is usually a pointer check).
	lastIDStr string
	lastID    kv.Identity
	lastIDOK  bool
}

// New returns a Normalizer, or an error for an invalid block config or encoding.
func New(cfg Config) (*Normalizer, error) {
	hc := cfg.Blocks
	if cfg.AnyBlockSize && hc.BlockSize == 0 {
		hc.BlockSize = 1 // the Hasher's block size only sizes its first buffer
	}
	h, err := blocks.NewHasher(hc)
	if err != nil {
		return nil, fmt.Errorf("creating normalizer: %w", err)
	}
	if _, err := codec.ParseEncoding(string(cfg.Encoding)); err != nil {
		return nil, fmt.Errorf("creating normalizer: %w", err)
	}
	if cfg.MaxSaltedBlocks <= 0 {
		cfg.MaxSaltedBlocks = DefaultMaxSaltedBlocks
	}
	return &Normalizer{cfg: cfg, h: h, salts: map[kv.EngineHash]uint64{}}, nil
}

// Apply normalizes one decoded batch. Events that cannot be normalized are skipped and counted;
// events of KV cache groups whose blocks do not line up with the prompt, non-dense stored spans and
// stored events of another block size are listed in Result.Filtered.
func (n *Normalizer) Apply(b *codec.Batch) Result {
	res := Result{Ops: make([]Op, 0, len(b.Events))}
	// One slab for the Stored entries of the whole batch.
	total := 0
	for i := range b.Events {
		if ev := &b.Events[i]; ev.Type == codec.BlockStored {
			total += len(ev.BlockHashes)
		}
	}
	slab := make([]Stored, total)
	for i := range b.Events {
		ev := &b.Events[i]
		op := Op{Type: ev.Type, Medium: ev.Medium, WorkerID: ev.WorkerID, DPRank: ev.DPRank}
		if r := n.filter(ev); r != 0 {
			res.Filtered = append(res.Filtered, Filtered{Event: i, Reason: r})
			continue
		}
		switch ev.Type {
		case codec.BlockStored:
			if len(ev.TokenIDs) == 0 && ev.LocalHashes == nil && ev.HasMedium && ev.Medium != "GPU" {
				res.Ignored++
				continue
			}
			if ev.LocalHashes == nil {
				if !Dense(ev) {
					res.Filtered = append(res.Filtered, Filtered{Event: i, Reason: NonDenseBlockSpan})
					continue
				}
				if ev.BlockSize != n.cfg.Blocks.BlockSize && !n.cfg.AnyBlockSize {
					res.Filtered = append(res.Filtered, Filtered{Event: i, Reason: BlockSizeMismatch})
					continue
				}
			}
			nb := len(ev.BlockHashes)
			st, err := n.stored(ev, slab[:nb:nb])
			if err != nil {
				clear(slab[:nb])
				res.Skipped++
				if res.FirstErr == nil {
					res.FirstErr = fmt.Errorf("normalizing event %d: %w", i, err)
				}
				continue
			}
			op.Stored = st
			slab = slab[nb:]
		case codec.BlockRemoved:
			op.Removed = append([]kv.EngineHash(nil), ev.BlockHashes...)
			for _, h := range ev.BlockHashes {
				delete(n.salts, h)
			}
		case codec.AllBlocksCleared:
			clear(n.salts)
			n.ring, n.next = n.ring[:0], 0
		}
		res.Ops = append(res.Ops, op)
	}
	return res
}

// filter applies the KV cache group rule to a BlockStored or BlockRemoved event (0: use it).
func (n *Normalizer) filter(ev *codec.Event) SkipReason {
	if ev.Type == codec.AllBlocksCleared {
		return 0
	}
	return n.groups.Admit(ev)
}

// stored fills out (len(ev.BlockHashes) zero entries) with the event's index entries.
func (n *Normalizer) stored(ev *codec.Event, out []Stored) ([]Stored, error) {
	nb := len(ev.BlockHashes)
	for i, h := range ev.BlockHashes {
		out[i].EngineHash = h
		if i > 0 {
			out[i].ParentEngineHash, out[i].HasParent = ev.BlockHashes[i-1], true
		} else {
			out[i].ParentEngineHash, out[i].HasParent = ev.Parent, ev.HasParent
		}
	}
	if ev.LocalHashes != nil { // Dynamo: the publisher already computed LocalBlockHash
		if len(ev.LocalHashes) != nb {
			return nil, fmt.Errorf("checking tokens_hash count %d for %d blocks: %w", len(ev.LocalHashes), nb, ErrEvent)
		}
		for i := range out {
			out[i].LocalHash, out[i].Kind = ev.LocalHashes[i], blocks.Precomputed
		}
		return out, nil
	}
	bs := ev.BlockSize // checked by Apply: dense, and the worker's unless AnyBlockSize
	if ev.HasExtraKeys && len(ev.ExtraKeys) != nb {
		return nil, fmt.Errorf("checking %d extra_keys entries for %d blocks: %w", len(ev.ExtraKeys), nb, ErrEvent)
	}
	lora := ""
	if ev.HasLoRAName {
		lora = ev.LoRAName
	}
	salt, salted := n.chainSalt(ev, lora)
	seed := blocks.BaseSeed + blocks.LoRATerm(lora) + salt
	sglang := n.cfg.Encoding == codec.SGLang
	n.ids, n.idEnd = n.ids[:0], n.idEnd[:0]
	for i := range out {
		toks := ev.TokenIDs[i*bs : (i+1)*bs : (i+1)*bs]
		from := len(n.ids)
		if ev.HasExtraKeys && !sglang {
			for _, k := range ev.ExtraKeys[i] {
				if id, ok := n.identityOf(k); ok {
					n.ids = append(n.ids, id)
				}
			}
		}
		n.idEnd = append(n.idEnd, len(n.ids))
		bh := n.h.Block(toks, n.ids[from:], seed, nil)
		out[i].LocalHash, out[i].Kind = bh.Hash, bh.Kind
		if sglang && hasPadValue(toks) {
			out[i].Kind = blocks.Normalized // SGLang pads media runs itself (pad_value ≥ 1_000_000)
		}
		if salted {
			n.remember(out[i].EngineHash, salt)
		}
	}
	if len(n.ids) > 0 { // one allocation for the event's identities
		ids := append([]kv.Identity(nil), n.ids...)
		from := 0
		for i, end := range n.idEnd {
			if end > from {
				out[i].Identities = ids[from:end:end]
			}
			from = end
		}
	}
	return out, nil
}

// identityOf is the package identityOf with a one-entry cache.
func (n *Normalizer) identityOf(k codec.ExtraKey) (kv.Identity, bool) {
	if k.Kind != codec.KeyString && k.Kind != codec.KeyPair {
		return 0, false
	}
	if k.Str != n.lastIDStr || k.Str == "" {
		n.lastIDStr = k.Str
		n.lastID, n.lastIDOK = ParseIdentity(k.Str)
	}
	return n.lastID, n.lastIDOK
}

// chainSalt returns the salt term of the event's chain: read from the first block's extra_keys when
// the event starts a chain (parent null), else inherited from the parent block.
func (n *Normalizer) chainSalt(ev *codec.Event, lora string) (uint64, bool) {
	if ev.HasParent {
		s, ok := n.salts[ev.Parent]
		return s, ok
	}
	if !ev.HasExtraKeys || len(ev.ExtraKeys) == 0 {
		return 0, false
	}
	for _, k := range ev.ExtraKeys[0] {
		if k.Kind != codec.KeyString || k.Str == "" || (lora != "" && k.Str == lora) || IsIdentity(k.Str) {
			continue
		}
		return blocks.SaltTerm(k.Str), true
	}
	return 0, false
}

func (n *Normalizer) remember(h kv.EngineHash, salt uint64) {
	if _, ok := n.salts[h]; !ok {
		if len(n.ring) < n.cfg.MaxSaltedBlocks {
			n.ring = append(n.ring, h)
		} else {
			delete(n.salts, n.ring[n.next])
			n.ring[n.next] = h
			n.next = (n.next + 1) % len(n.ring)
		}
	}
	n.salts[h] = salt
}

func hasPadValue(toks []uint32) bool {
	for _, t := range toks {
		if t >= blocks.PadShift {
			return true
		}
	}
	return false
}
