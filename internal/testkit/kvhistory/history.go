// Package kvhistory generates the KV event history of a simulated vLLM worker for the snapshot,
// subscriber and cluster tests and benchmarks, and applies batches to an index the way
// kvevents/subscriber does (the reference a snapshot must reproduce).
package kvhistory

import (
	"cmp"
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/kvevents/normalize"
)

// BlockSize is the block size of the generated events (normalize.DefaultConfig's).
const BlockSize = 16

// History generates a worker's KV event batches the way a vLLM worker publishes them: new chains
// (some salted, some under a LoRA, some with media identities in extra_keys and pad runs in their
// tokens), chains continued from held blocks, removals of held blocks (leaves and inner blocks),
// removed blocks stored again, and now and then AllBlocksCleared.
type History struct {
	rng  *rand.Rand
	seed uint64
	next uint64
	// content of every block ever stored, by engine hash (an engine hash names its content)
	content map[kv.EngineHash]codec.Event
	held    []kv.EngineHash
	isHeld  map[kv.EngineHash]bool
	removed []kv.EngineHash
}

func New(seed uint64) *History {
	return &History{rng: rand.New(rand.NewPCG(seed, 7)), seed: seed, next: 1, content: map[kv.EngineHash]codec.Event{}, isHeld: map[kv.EngineHash]bool{}}
}

// hash returns a new engine hash, distinct between histories of different seeds.
func (h *History) hash() kv.EngineHash {
	h.next++
	return kv.EngineHash((h.next^h.seed<<40)*0x9e3779b97f4a7c15 | 1)
}

// Batch returns the next batch's events.
func (h *History) Batch() []codec.Event {
	var evs []codec.Event
	for range 1 + h.rng.IntN(3) {
		switch r := h.rng.IntN(100); {
		case h.rng.IntN(1500) == 0:
			evs = append(evs, codec.Event{Type: codec.AllBlocksCleared})
			h.held, h.removed = h.held[:0], h.removed[:0]
			clear(h.isHeld)
		case r < 25 && len(h.held) > 0:
			n := 1 + h.rng.IntN(3)
			ev := codec.Event{Type: codec.BlockRemoved}
			for range n {
				if len(h.held) == 0 {
					break
				}
				i := h.rng.IntN(len(h.held))
				x := h.held[i]
				h.held = slices.Delete(h.held, i, i+1)
				delete(h.isHeld, x)
				h.removed = append(h.removed, x)
				ev.BlockHashes = append(ev.BlockHashes, x)
			}
			evs = append(evs, ev)
		case r < 32 && len(h.removed) > 0:
			// a removed block stored again, with its own content and parent
			i := h.rng.IntN(len(h.removed))
			x := h.removed[i]
			h.removed = slices.Delete(h.removed, i, i+1)
			if h.isHeld[x] {
				continue
			}
			ev := h.content[x]
			if ev.HasParent && !h.isHeld[ev.Parent] {
				continue // vLLM stores a block only under a held parent
			}
			h.hold(x)
			evs = append(evs, ev)
		default:
			evs = append(evs, h.stored())
		}
	}
	return evs
}

func (h *History) hold(x kv.EngineHash) {
	h.held = append(h.held, x)
	h.isHeld[x] = true
}

// stored makes a BlockStored of 1..4 new blocks, a new chain or one continued from a held block.
func (h *History) stored() codec.Event {
	nb := 1 + h.rng.IntN(4)
	ev := codec.Event{Type: codec.BlockStored, BlockSize: BlockSize, HasLoRAName: true, HasExtraKeys: true}
	lora, salt := "", ""
	if len(h.held) > 0 && h.rng.IntN(2) == 0 {
		ev.Parent, ev.HasParent = h.held[h.rng.IntN(len(h.held))], true
		lora = h.content[ev.Parent].LoRAName
	} else {
		if h.rng.IntN(4) == 0 {
			lora = "adapter-a"
		}
		if h.rng.IntN(3) == 0 {
			salt = "salt-" + string(rune('a'+h.rng.IntN(3)))
		}
	}
	ev.LoRAName, ev.HasLoRAName = lora, lora != ""
	if h.rng.IntN(5) == 0 {
		ev.GroupIdx, ev.HasGroupIdx = 0, true
	}
	for b := range nb {
		var keys []codec.ExtraKey
		if lora != "" {
			keys = append(keys, codec.ExtraKey{Kind: codec.KeyString, Str: lora})
		}
		toks := make([]uint32, BlockSize)
		for i := range toks {
			toks[i] = uint32(h.rng.IntN(50000))
		}
		if h.rng.IntN(4) == 0 { // a media item's placeholder run with its identity
			id := kv.Identity(h.rng.Uint64())
			for i := 4; i < 12; i++ {
				toks[i] = 151655
			}
			keys = append(keys, codec.ExtraKey{Kind: codec.KeyPair, Str: id.UUID(), Offset: 4})
		}
		if b == 0 && salt != "" {
			keys = append(keys, codec.ExtraKey{Kind: codec.KeyString, Str: salt})
		}
		ev.TokenIDs = append(ev.TokenIDs, toks...)
		ev.ExtraKeys = append(ev.ExtraKeys, keys)
		x := h.hash()
		ev.BlockHashes = append(ev.BlockHashes, x)
	}
	// each block's own content, to store it again after a removal
	parent, hasParent := ev.Parent, ev.HasParent
	for b, x := range ev.BlockHashes {
		one := ev
		one.BlockHashes = []kv.EngineHash{x}
		one.Parent, one.HasParent = parent, hasParent
		one.TokenIDs = ev.TokenIDs[b*BlockSize : (b+1)*BlockSize]
		one.ExtraKeys = ev.ExtraKeys[b : b+1]
		h.content[x] = one
		h.hold(x)
		parent, hasParent = x, true
	}
	return ev
}

// Applier applies batches to an index the way kvevents/subscriber does (decode, normalize, store).
type Applier struct {
	t    testing.TB
	ix   *index.Index
	key  index.WorkerKey
	norm *normalize.Normalizer
	dec  *codec.Decoder
}

func NewApplier(t testing.TB, ix *index.Index, id string) *Applier {
	t.Helper()
	n, err := normalize.New(normalize.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return &Applier{t: t, ix: ix, key: index.WorkerKey{ID: id}, norm: n, dec: codec.NewDecoder()}
}

func (a *Applier) Apply(payload []byte) {
	a.t.Helper()
	b, err := a.dec.Decode(codec.VLLM, payload)
	if err != nil {
		a.t.Fatal(err)
	}
	ctx := context.Background()
	for i := range b.Events {
		one := codec.Batch{Events: b.Events[i : i+1]}
		for _, op := range a.norm.Apply(&one).Ops {
			switch op.Type {
			case codec.BlockStored:
				sb := make([]index.StoredBlock, len(op.Stored))
				for j, s := range op.Stored {
					sb[j] = index.StoredBlock{EngineHash: s.EngineHash, Parent: s.ParentEngineHash, HasParent: s.HasParent, LocalHash: s.LocalHash}
				}
				_ = a.ix.Store(ctx, a.key, sb) // unknown parents are dropped, as live
			case codec.BlockRemoved:
				a.ix.Remove(ctx, a.key, op.Removed)
			case codec.AllBlocksCleared:
				a.ix.Clear(ctx, a.key)
			}
		}
	}
}

// Encode writes events as one vLLM KVEventBatch (positional batch, map events).
func Encode(t testing.TB, evs []codec.Event) []byte {
	t.Helper()
	p, err := codec.EncodeVLLM(&codec.Batch{TS: 1, Events: evs, HasDPRank: true}, codec.ArrayForm, codec.MapForm)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Dumped returns a worker's index entries (DP rank 0), sorted by engine hash.
func Dumped(ix *index.Index, id string) []index.StoredBlock {
	return DumpedKey(ix, index.WorkerKey{ID: id})
}

// DumpedKey returns the index entries of one worker rank, sorted by engine hash.
func DumpedKey(ix *index.Index, k index.WorkerKey) []index.StoredBlock {
	d := ix.Dump(context.Background(), k)
	slices.SortFunc(d, func(a, b index.StoredBlock) int { return cmp.Compare(a.EngineHash, b.EngineHash) })
	return d
}
