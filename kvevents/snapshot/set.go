package snapshot

import (
	"github.com/kvroute/kvroute/kvevents/codec"
)

// DefaultMaxBlocks is the default Set bound: 1 Mi blocks per rank (an engine with 16-token blocks
// and 16 Mi tokens of KV cache). Set it to the engine's GPU block count (vLLM num_gpu_blocks).
const DefaultMaxBlocks = 1 << 20

// meta holds the event fields a block shares with the other blocks of its kind; a Set keeps one
// per distinct value.
type meta struct {
	blockSize   int
	loraID      int64
	hasLoRAID   bool
	medium      string
	hasMedium   bool
	loraName    string
	hasLoRAName bool
	groupIdx    int64
	hasGroupIdx bool
	// dense: the event carried block_size tokens per block (a router applies only dense events).
	dense bool
}

// Block is one block a worker holds. It is immutable once stored, so a snapshot being written
// can read it while the Set goes on.
type Block struct {
	Hash      uint64
	Parent    uint64
	HasParent bool
	// Tokens are the block's block_size token ids (nil when the event carried none).
	Tokens []uint32
	// Keys is the block's extra_keys entry; HasKeys false when the event had none (null or absent).
	Keys    []codec.ExtraKey
	HasKeys bool
	m       *meta
	// insertion order, oldest first (for the MaxBlocks bound)
	prev, next *Block
	// mark is the Set's walk epoch in which this block was last decided, and the decision.
	mark uint32
}

// Set is the block set of one worker rank, built from the rank's batches in sequence order. It is
// not safe for concurrent use (the rank's forwarding goroutine owns it); the blocks Order returns
// stay valid after later changes.
type Set struct {
	max    int
	blocks map[key]*Block
	groups []int64 // the group_idx values seen (0 for events without one), for removals without one
	head   *Block  // oldest
	tail   *Block  // newest
	metas  map[meta]*meta
	epoch  uint32
	// complete: the set holds every block since the engine's cache was empty (its first batch, or an
	// AllBlocksCleared, was applied since the last Reset).
	complete bool
	// Evicted counts blocks dropped by the MaxBlocks bound; a non-zero count means the set missed
	// removals (or the bound is below the engine's cache).
	Evicted uint64
}

// NewSet returns an empty Set holding at most maxBlocks blocks (DefaultMaxBlocks when <= 0).
func NewSet(maxBlocks int) *Set {
	if maxBlocks <= 0 {
		maxBlocks = DefaultMaxBlocks
	}
	return &Set{max: maxBlocks, blocks: map[key]*Block{}, metas: map[meta]*meta{}}
}

// key names a block: vLLM publishes one BlockStored per KV cache group, with the same block hashes
// for groups of one block size, so a hash alone does not name one block.
type key struct {
	hash  uint64
	group int64
}

func (b *Block) key() key { return key{b.Hash, b.m.groupIdx} }

// Len returns the number of blocks held.
func (s *Set) Len() int { return len(s.blocks) }

// Complete reports whether the set holds every block since the engine's cache was empty.
func (s *Set) Complete() bool { return s.complete }

// Reset empties the set after lost batches (a publisher reset): what follows is all it will know, so
// it is incomplete until the engine clears its cache. first says the next batch is the engine's first
// (seq 0), so the set is complete again.
func (s *Set) Reset(first bool) {
	s.clear()
	s.complete = first
}

func (s *Set) clear() {
	clear(s.blocks)
	clear(s.metas)
	s.groups = s.groups[:0]
	s.head, s.tail = nil, nil
}

// Apply applies one decoded batch, in the order of its events, the way the router's index does: a
// BlockStored adds its blocks (a CPU-tier announcement without tokens is ignored, as the router's
// normalizer ignores it), BlockRemoved drops them, AllBlocksCleared empties the set and makes it
// complete.
func (s *Set) Apply(b *codec.Batch) {
	for i := range b.Events {
		ev := &b.Events[i]
		switch ev.Type {
		case codec.BlockStored:
			s.store(ev)
		case codec.BlockRemoved:
			for _, h := range ev.BlockHashes {
				if ev.HasGroupIdx {
					s.remove(key{h, ev.GroupIdx})
					continue
				}
				for _, g := range s.groups {
					s.remove(key{h, g})
				}
			}
		case codec.AllBlocksCleared:
			s.clear()
			s.complete = true
		}
	}
}

func (s *Set) store(ev *codec.Event) {
	nb := len(ev.BlockHashes)
	if nb == 0 || (len(ev.TokenIDs) == 0 && ev.LocalHashes == nil && ev.HasMedium && ev.Medium != "GPU") {
		return
	}
	bs := ev.BlockSize
	dense := bs > 0 && len(ev.TokenIDs) == nb*bs
	m := s.meta(meta{
		blockSize: bs, loraID: ev.LoRAID, hasLoRAID: ev.HasLoRAID, medium: ev.Medium, hasMedium: ev.HasMedium,
		loraName: ev.LoRAName, hasLoRAName: ev.HasLoRAName, groupIdx: ev.GroupIdx, hasGroupIdx: ev.HasGroupIdx,
		dense: dense,
	})
	s.noteGroup(m.groupIdx)
	parent, hasParent := ev.Parent, ev.HasParent
	for i, h := range ev.BlockHashes {
		blk := &Block{Hash: h, Parent: parent, HasParent: hasParent, m: m}
		if dense {
			// A copy per block: a slab per event would keep a removed block's tokens alive while a
			// sibling lives.
			blk.Tokens = append([]uint32(nil), ev.TokenIDs[i*bs:(i+1)*bs]...)
		}
		if ev.HasExtraKeys && i < len(ev.ExtraKeys) {
			blk.Keys, blk.HasKeys = ev.ExtraKeys[i], true
		} else if ev.HasExtraKeys {
			blk.HasKeys = true
		}
		k := blk.key()
		if old := s.blocks[k]; old != nil {
			s.unlink(old)
		}
		s.blocks[k] = blk
		s.push(blk)
		parent, hasParent = h, true
	}
	for len(s.blocks) > s.max {
		old := s.head
		s.unlink(old)
		delete(s.blocks, old.key())
		s.Evicted++
	}
}

func (s *Set) remove(k key) {
	if blk := s.blocks[k]; blk != nil {
		s.unlink(blk)
		delete(s.blocks, k)
	}
}

func (s *Set) noteGroup(g int64) {
	for _, x := range s.groups {
		if x == g {
			return
		}
	}
	if len(s.groups) < 64 {
		s.groups = append(s.groups, g)
	}
}

// meta returns the Set's shared copy of m.
func (s *Set) meta(m meta) *meta {
	if p := s.metas[m]; p != nil {
		return p
	}
	if len(s.metas) >= 4096 { // event fields come from the engine; keep the table bounded
		clear(s.metas)
	}
	p := &m
	s.metas[m] = p
	return p
}

func (s *Set) push(b *Block) {
	b.prev, b.next = s.tail, nil
	if s.tail != nil {
		s.tail.next = b
	} else {
		s.head = b
	}
	s.tail = b
}

func (s *Set) unlink(b *Block) {
	if b.prev != nil {
		b.prev.next = b.next
	} else {
		s.head = b.next
	}
	if b.next != nil {
		b.next.prev = b.prev
	} else {
		s.tail = b.prev
	}
	b.prev, b.next = nil, nil
}

// Decisions of one Order walk, stored in Block.mark next to the epoch.
const (
	markEmitted = 1
	markOmitted = 2
)

// Order returns the blocks a router can apply, parents before children (oldest stored first, a
// block's missing ancestors just before it): a block is left out when its parent is not held (the
// engine removed it; the router's index keeps such a block under a placeholder that matches
// nothing) or when it or an ancestor came in an event a router cannot use (tokens not block_size per
// block). O(blocks held).
func (s *Set) Order() []*Block {
	s.epoch++
	if s.epoch == 1<<30 { // marks hold epoch<<2 | decision; start over before it overflows
		for _, b := range s.blocks {
			b.mark = 0
		}
		s.epoch = 1
	}
	ep := s.epoch << 2
	out := make([]*Block, 0, len(s.blocks))
	var stack []*Block
	for b := s.head; b != nil; b = b.next {
		stack = stack[:0]
		for c := b; c != nil; {
			if c.mark&^3 == ep {
				break
			}
			stack = append(stack, c)
			if !c.HasParent {
				break
			}
			c = s.blocks[key{c.Parent, c.m.groupIdx}]
		}
		for i := len(stack) - 1; i >= 0; i-- {
			c := stack[i]
			ok := c.m.dense
			if ok && c.HasParent {
				p := s.blocks[key{c.Parent, c.m.groupIdx}]
				ok = p != nil && p.mark == ep|markEmitted
			}
			if ok {
				c.mark = ep | markEmitted
				out = append(out, c)
			} else {
				c.mark = ep | markOmitted
			}
		}
	}
	return out
}
