package snapshot

import (
	"github.com/kvroute/kvroute/kv"
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
	// specKind is the event's kv_cache_spec_kind, sent on so that the router's KV cache group
	// filter (kvevents/normalize GroupFilter) admits or skips the snapshot's blocks as it did the
	// live events'.
	specKind    string
	hasSpecKind bool
}

// Block is one block a worker holds (or held: see Set). Its exported fields never change once
// stored, so a snapshot being written can read them while the Set goes on.
type Block struct {
	// Hash and Parent are the engine's block hashes, as its events name them.
	Hash      kv.EngineHash
	Parent    kv.EngineHash
	HasParent bool
	// Tokens are the block's block_size token ids.
	Tokens []uint32
	// Keys is the block's extra_keys entry; HasKeys false when the event had none (null or absent).
	Keys    []codec.ExtraKey
	HasKeys bool
	m       *meta

	// The fields below belong to the Set's goroutine.
	prev, next *Block // insertion order, oldest first (for the MaxBlocks bound)
	children   int32  // blocks in the set stored under this one
	ghost      bool   // removed by the engine but kept: blocks stored under it are still held
	mark       uint32 // the Order walk that last decided it (epoch<<2 | decision)
}

// key names a block: vLLM publishes one BlockStored per KV cache group, with the same block hashes
// for groups of one block size, so a hash alone does not name one block.
type key struct {
	hash  kv.EngineHash
	group int64
}

func (b *Block) key() key        { return key{b.Hash, b.m.groupIdx} }
func (b *Block) parentKey() key  { return key{b.Parent, b.m.groupIdx} }
func (b *Block) GroupIdx() int64 { return b.m.groupIdx }

// Set is the block set of one worker rank, built from the rank's batches in sequence order the
// way the router's index (kv/index) applies them: a block stored under a parent the set does
// not hold is dropped with the rest of its event (the index refuses it: unknown parent), and a
// removed block that still has blocks stored under it is kept as a placeholder (the index keeps it
// too, so the blocks under it count again when the engine stores it again). A snapshot therefore
// rebuilds the index entries exactly. It is not safe for concurrent use (the rank's forwarding
// goroutine owns it); the blocks Order returns stay valid after later changes.
type Set struct {
	max    int
	blocks map[key]*Block // held blocks and placeholders
	held   int
	head   *Block // oldest
	tail   *Block // newest
	metas  map[meta]*meta
	groups []int64 // the group_idx values seen (0 for events without one), for removals without one
	epoch  uint32
	// complete: the set holds every block since the engine's cache was empty (its first batch, or an
	// AllBlocksCleared, was applied since the last Reset).
	complete bool
	// Evicted counts blocks dropped by the MaxBlocks bound; a non-zero count means the set missed
	// removals (or the bound is below the engine's cache).
	Evicted uint64
}

// NewSet returns an empty Set holding at most maxBlocks blocks and placeholders (DefaultMaxBlocks
// when <= 0).
func NewSet(maxBlocks int) *Set {
	if maxBlocks <= 0 {
		maxBlocks = DefaultMaxBlocks
	}
	return &Set{max: maxBlocks, blocks: map[key]*Block{}, metas: map[meta]*meta{}}
}

// Len returns the number of blocks held (placeholders not counted).
func (s *Set) Len() int { return s.held }

// Placeholders returns the number of removed blocks kept because blocks under them are held.
func (s *Set) Placeholders() int { return len(s.blocks) - s.held }

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
	s.held = 0
}

// Apply applies one decoded batch, in the order of its events, the way the router's index does: a
// BlockStored adds its blocks (a CPU-tier announcement without tokens, or an event whose tokens
// are not block_size per block, is skipped, as the router's normalizer skips it), BlockRemoved
// drops them, AllBlocksCleared empties the set and makes it complete.
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
	nb, bs := len(ev.BlockHashes), ev.BlockSize
	if nb == 0 || bs <= 0 || len(ev.TokenIDs) != nb*bs || (ev.HasExtraKeys && len(ev.ExtraKeys) != nb) {
		return // the router skips it whole (or ignores it: a CPU-tier announcement without tokens)
	}
	m := s.meta(meta{
		blockSize: bs, loraID: ev.LoRAID, hasLoRAID: ev.HasLoRAID, medium: ev.Medium, hasMedium: ev.HasMedium,
		loraName: ev.LoRAName, hasLoRAName: ev.HasLoRAName, groupIdx: ev.GroupIdx, hasGroupIdx: ev.HasGroupIdx,
		specKind: ev.SpecKind, hasSpecKind: ev.HasSpecKind,
	})
	s.noteGroup(m.groupIdx)
	parent, hasParent := ev.Parent, ev.HasParent
	for i, h := range ev.BlockHashes {
		if hasParent && parent == h {
			continue // a block naming itself as parent: the index ignores it (Dynamo: an empty removal)
		}
		blk := &Block{Hash: h, Parent: parent, HasParent: hasParent, m: m}
		var p *Block
		if hasParent {
			if p = s.blocks[blk.parentKey()]; p == nil || p.ghost {
				return // unknown parent: the index drops this block and the rest of the event
			}
		}
		// A copy per block: a slab per event would keep a removed block's tokens alive while a
		// sibling lives.
		blk.Tokens = append([]uint32(nil), ev.TokenIDs[i*bs:(i+1)*bs]...)
		if ev.HasExtraKeys {
			blk.Keys, blk.HasKeys = ev.ExtraKeys[i], true
		}
		k := blk.key()
		old := s.blocks[k]
		if p != nil {
			p.children++
		}
		if old != nil {
			blk.children = old.children
			if !old.ghost {
				s.held--
			}
			s.unlink(old)
			s.release(old)
		}
		s.blocks[k] = blk
		s.held++
		s.push(blk)
		parent, hasParent = h, true
	}
	for len(s.blocks) > s.max {
		old := s.head
		s.unlink(old)
		delete(s.blocks, old.key())
		if !old.ghost {
			s.held--
		}
		s.release(old)
		s.Evicted++
	}
}

// remove applies the engine's removal of block k: it stays as a placeholder while blocks under it
// are held.
func (s *Set) remove(k key) {
	blk := s.blocks[k]
	if blk == nil || blk.ghost {
		return
	}
	s.held--
	if blk.children > 0 {
		blk.ghost = true
		return
	}
	s.unlink(blk)
	delete(s.blocks, k)
	s.release(blk)
}

// release drops b's reference to its parent, freeing placeholders left without a purpose.
func (s *Set) release(b *Block) {
	for b.HasParent {
		p := s.blocks[b.parentKey()]
		if p == nil {
			return
		}
		if p.children--; p.children > 0 || !p.ghost {
			return
		}
		s.unlink(p)
		delete(s.blocks, p.key())
		b = p
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
	} else if s.head == b {
		s.head = b.next
	}
	if b.next != nil {
		b.next.prev = b.prev
	} else if s.tail == b {
		s.tail = b.prev
	}
	b.prev, b.next = nil, nil
}

// Decisions of one Order walk, stored in Block.mark next to the epoch.
const (
	markEmitted  = 1
	markOmitted  = 2
	markVisiting = 3 // on the walk's stack: meeting it again is a parent cycle (bad engine input)
)

// View is what a snapshot sends: Blocks to store, parents before children, then Removed (a subset
// of Blocks, the placeholders) to remove again, which leaves them in the router's index as the
// engine's removals left them.
type View struct {
	Blocks  []*Block
	Removed []*Block
}

// Order returns the set's blocks in snapshot order: oldest stored first, a block's ancestors before
// it. A block is left out when its parent is not in the set (only after the MaxBlocks bound dropped
// the parent). O(blocks in the set).
func (s *Set) Order() View {
	s.epoch++
	if s.epoch == 1<<30 { // marks hold epoch<<2 | decision; start over before it overflows
		for _, b := range s.blocks {
			b.mark = 0
		}
		s.epoch = 1
	}
	ep := s.epoch << 2
	v := View{Blocks: make([]*Block, 0, len(s.blocks))}
	var stack []*Block
	for b := s.head; b != nil; b = b.next {
		stack = stack[:0]
		for c := b; c != nil; {
			if c.mark&^3 == ep {
				break // decided already, or a cycle: its blocks are left out
			}
			c.mark = ep | markVisiting
			stack = append(stack, c)
			if !c.HasParent {
				break
			}
			c = s.blocks[c.parentKey()]
		}
		for i := len(stack) - 1; i >= 0; i-- {
			c := stack[i]
			ok := true
			if c.HasParent {
				p := s.blocks[c.parentKey()]
				ok = p != nil && p.mark == ep|markEmitted
			}
			if !ok {
				c.mark = ep | markOmitted
				continue
			}
			c.mark = ep | markEmitted
			v.Blocks = append(v.Blocks, c)
			if c.ghost {
				v.Removed = append(v.Removed, c)
			}
		}
	}
	return v
}
