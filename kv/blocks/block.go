package blocks

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/kvroute/kvroute/kv"

	"github.com/zeebo/xxh3"
)

// Kind says how a complete block was hashed (DESIGN.md §5).
type Kind uint8

const (
	// Plain blocks intersect no media span: xxh3_64(le_u32(tokens), seed), even if they hold pad ids.
	Plain Kind = iota + 1
	// Normalized blocks had each placeholder run replaced with its media object's PadValue, then were
	// hashed like plain blocks.
	Normalized
	// Boundary blocks intersect media spans but could not be normalized (no placeholder run, or the
	// number of media objects differs from the number of intersecting spans): the worker tokens
	// followed by the sorted identities are hashed.
	Boundary
	// Precomputed marks a hash taken as published (Dynamo RouterEvent tokens_hash), not recomputed.
	Precomputed
)

// String is the lowercase name used in JSON output: "plain", "normalized", "boundary", "precomputed".
func (k Kind) String() string {
	switch k {
	case Plain:
		return "plain"
	case Normalized:
		return "normalized"
	case Boundary:
		return "boundary"
	case Precomputed:
		return "precomputed"
	}
	return "unknown"
}

// ErrConfig is wrapped by errors about an invalid Config.
var ErrConfig = errors.New("invalid block config")

// Config is what the block rule needs to know about a model and its workers.
type Config struct {
	// BlockSize is the worker's KV block size in tokens (vLLM block_size, SGLang page_size). Must be > 0.
	BlockSize int
	// ImagePad and VideoPad are the model's placeholder token ids (Qwen3-VL: 151655 and 151656). When
	// they are equal (Nemotron 3 Nano Omni: image and video features share <image>), every run of
	// that id starts a media object, as image runs do: Dynamo's event side for such models uses
	// the image normalizer alone (event_video_token_id None).
	ImagePad, VideoPad uint32
}

// MaxBlockSize bounds Config.BlockSize (vLLM and SGLang use at most a few hundred tokens per block).
const MaxBlockSize = 1 << 16

// Validate reports a Config that cannot hash blocks, wrapping ErrConfig.
func (c Config) Validate() error {
	if c.BlockSize <= 0 || c.BlockSize > MaxBlockSize {
		return fmt.Errorf("checking block size %d: %w", c.BlockSize, ErrConfig)
	}
	return nil
}

// Hashed is the result of hashing one complete block.
type Hashed struct {
	// Hash is the block's LocalBlockHash (DESIGN.md §5).
	Hash kv.BlockHash
	// Kind is how it was computed.
	Kind Kind
	// Runs is the number of maximal runs of one placeholder id in the block.
	Runs int
	// Objects is the number of media objects those runs were grouped into.
	Objects int
}

// Hasher hashes single blocks with the DESIGN.md §5 rule. It owns scratch buffers, so one Hasher must
// not be used by two goroutines at once; make one per goroutine (they are cheap).
type Hasher struct {
	cfg Config
	buf []byte        // le_u32 tokens ‖ u64le identities; never aliases a caller's slice
	ids []kv.Identity // sort scratch
	obj []int         // media object index of each run
	run []int         // run start, end pairs
}

// NewHasher returns a Hasher for cfg, or an error wrapping ErrConfig.
func NewHasher(cfg Config) (*Hasher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Hasher{cfg: cfg, buf: make([]byte, 0, 4*cfg.BlockSize+64)}, nil
}

// Config returns the Hasher's configuration.
func (h *Hasher) Config() Config { return h.cfg }

// Block hashes one complete block: the request side calls it with the identities of the media spans
// that intersect the block (in prompt order, duplicates kept), the event side with the identities read
// from the stored block's extra_keys (in order). tokens are the worker-visible ids and are only read;
// len(tokens) must be the block size (a shorter or longer block is hashed as given; callers hash
// complete blocks only). If routing is non-nil it must have len(tokens) and receives the block's routing
// tokens (pad values in normalized blocks, the worker tokens otherwise).
//
// Rule (Dynamo normalize_mm_placeholder_runs + compute_block_hash_for_seq): no identity → Plain; else
// find maximal runs of one pad id, group them into objects (an image run starts an object, a video run
// continues the previous object when the previous run in the block was a video run); at least one run
// and objects == len(identities) → each run filled with PadValue of its object's identity and hashed
// alone (Normalized); otherwise the worker tokens ‖ sorted identities are hashed (Boundary).
func (h *Hasher) Block(tokens []uint32, identities []kv.Identity, seed uint64, routing []uint32) Hashed {
	if routing != nil {
		copy(routing, tokens)
	}
	n := 4 * len(tokens)
	if len(identities) == 0 {
		var sum uint64
		sum, h.buf = hashTokensInto(h.buf, tokens, seed)
		return Hashed{Hash: kv.BlockHash(sum), Kind: Plain}
	}
	runs, objects := h.findRuns(tokens)
	if runs > 0 && objects == len(identities) {
		h.buf = grow(h.buf, n)
		putTokens(h.buf, tokens)
		for r := 0; r < runs; r++ {
			pv := PadValue(identities[h.obj[r]])
			for i := h.run[2*r]; i < h.run[2*r+1]; i++ {
				binary.LittleEndian.PutUint32(h.buf[4*i:], pv)
				if routing != nil {
					routing[i] = pv
				}
			}
		}
		return Hashed{Hash: kv.BlockHash(xxh3.HashSeed(h.buf, seed)), Kind: Normalized, Runs: runs, Objects: objects}
	}
	h.buf = grow(h.buf, n+8*len(identities))
	putTokens(h.buf, tokens)
	h.ids = putSortedIdentities(h.buf[n:], identities, h.ids)
	return Hashed{Hash: kv.BlockHash(xxh3.HashSeed(h.buf, seed)), Kind: Boundary, Runs: runs, Objects: objects}
}

// findRuns records the maximal runs of one placeholder id in h.run and each run's object index in
// h.obj, and returns the number of runs and of objects.
func (h *Hasher) findRuns(tokens []uint32) (runs, objects int) {
	h.run, h.obj = h.run[:0], h.obj[:0]
	img, vid := h.cfg.ImagePad, h.cfg.VideoPad
	prevVideo := false
	for i := 0; i < len(tokens); {
		t := tokens[i]
		if t != img && t != vid {
			i++
			continue
		}
		j := i + 1
		for j < len(tokens) && tokens[j] == t {
			j++
		}
		isVideo := t == vid && vid != img
		if !(isVideo && prevVideo) {
			objects++
		}
		prevVideo = isVideo
		h.run = append(h.run, i, j)
		h.obj = append(h.obj, objects-1)
		runs++
		i = j
	}
	return runs, objects
}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}
