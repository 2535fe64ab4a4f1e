package index

import "github.com/kvroute/kvroute/kv"

// nilIdx marks a missing node or entry reference; rootNode is the radix root (the empty prefix).
const (
	nilIdx   int32 = -1
	rootNode int32 = 0
)

// Approximate sizes used by Stats (bytes).
const (
	nodeSize     = 24
	entrySize    = 48
	kidSlotBytes = 40 // 16-byte key, 4-byte value, control byte, load factor
)

// node is one radix node: a block (by local hash) under its parent node. The root is node 0.
// A free node keeps its arena slot and is chained through parent.
type node struct {
	hash   kv.BlockHash
	parent int32
	// child is one child kept inline (nilIdx when none); the node's other children are in tree.kids.
	child     int32
	nChildren int32
	// entries heads the list of (worker, node) entries, linked through entry.nNext.
	entries int32
}

// kidKey addresses a child by its parent node and local hash.
type kidKey struct {
	parent int32
	hash   kv.BlockHash
}

// entry flags.
const (
	fHeld uint8 = 1 << iota // the worker holds the block (else a placeholder kept for descendants)
	fLeaf                   // on the worker's leaf (eviction) list
	fFree                   // on the free list
)

// entry is one worker's entry on one node. Invariant: at most one entry per (worker, node).
type entry struct {
	// engine is the entry's (first) engine hash while held.
	engine kv.EngineHash
	node   int32
	// parent is the same worker's entry on the parent node, or nilIdx under the root.
	parent int32
	// childRefs counts the worker's entries on child nodes whose parent is this entry.
	childRefs int32
	// wPrev/wNext link the worker's leaf list (wNext also chains free entries); nNext the node's entries.
	wPrev, wNext int32
	nNext        int32
	// stamp is the store clock when the entry was last stored or refreshed (wraps; compared by
	// difference), used to pick the oldest leaf among workers for the total cap.
	stamp uint32
	// touched is the worker's own store clock (worker.clock) when the block was last stored or
	// touched by a routed request (age.go): the worker's blocks stored since then push it toward
	// the engine's LRU eviction. Written under the write lock or atomically under the read lock
	// (Touch), read atomically under the read lock.
	touched uint32
	// depth is the block's position in its chain (0 under the root): parent's depth + 1.
	depth int32
	slot  uint16
	flags uint8
}

// tree holds the arenas. Its fields are protected by Index.mu.
type tree struct {
	nodes    arena[node]
	freeNode int32
	kids     map[kidKey]int32
	// bits holds stride words per node, one page per node page: bit s set when the worker in slot s
	// holds the node.
	bits   [][]uint64
	stride int

	entries   arena[entry]
	freeEntry int32

	liveNodes, liveEntries int
}

func (t *tree) init() {
	t.stride = 1
	t.nodes.grow()
	t.bits = [][]uint64{make([]uint64, pageSize)}
	*t.nodes.at(rootNode) = node{parent: nilIdx, child: nilIdx, entries: nilIdx}
	t.freeNode = nilIdx
	t.kids = make(map[kidKey]int32)
	t.freeEntry = nilIdx
}

// growStride re-lays the bitsets with stride words per node.
func (t *tree) growStride(stride int) {
	for pi, old := range t.bits {
		nb := make([]uint64, pageSize*stride)
		for i := range pageSize {
			copy(nb[i*stride:], old[i*t.stride:(i+1)*t.stride])
		}
		t.bits[pi] = nb
	}
	t.stride = stride
}

// child returns the child of p with local hash h.
func (t *tree) child(p int32, h kv.BlockHash) (int32, bool) {
	pn := t.nodes.at(p)
	if c := pn.child; c != nilIdx {
		if t.nodes.at(c).hash == h {
			return c, true
		}
		if pn.nChildren == 1 {
			return nilIdx, false
		}
	} else if pn.nChildren == 0 {
		return nilIdx, false
	}
	c, ok := t.kids[kidKey{p, h}]
	return c, ok
}

// addChild creates the child of p with local hash h (which must not exist).
func (t *tree) addChild(p int32, h kv.BlockHash) int32 {
	var c int32
	if t.freeNode != nilIdx {
		c = t.freeNode
		t.freeNode = t.nodes.at(c).parent
	} else {
		var page bool
		if c, page = t.nodes.grow(); page {
			t.bits = append(t.bits, make([]uint64, pageSize*t.stride))
		}
	}
	*t.nodes.at(c) = node{hash: h, parent: p, child: nilIdx, entries: nilIdx}
	pn := t.nodes.at(p)
	if pn.child == nilIdx {
		pn.child = c
	} else {
		t.kids[kidKey{p, h}] = c
	}
	pn.nChildren++
	t.liveNodes++
	return c
}

// maybeFreeNode frees n and then its ancestors while they have no entries and no children.
func (t *tree) maybeFreeNode(n int32) {
	for n != rootNode {
		nd := t.nodes.at(n)
		if nd.entries != nilIdx || nd.nChildren != 0 {
			return
		}
		p := nd.parent
		pn := t.nodes.at(p)
		if pn.child == n {
			pn.child = nilIdx
		} else {
			delete(t.kids, kidKey{p, nd.hash})
		}
		pn.nChildren--
		*nd = node{parent: t.freeNode, child: nilIdx, entries: nilIdx}
		t.freeNode = n
		t.liveNodes--
		n = p
	}
}

func (t *tree) setBit(n int32, slot uint16) {
	t.words(n)[slot/64] |= 1 << (slot % 64)
}

func (t *tree) clearBit(n int32, slot uint16) {
	t.words(n)[slot/64] &^= 1 << (slot % 64)
}

func (t *tree) hasBit(n int32, slot uint16) bool {
	return t.words(n)[slot/64]&(1<<(slot%64)) != 0
}

// newEntry allocates an entry for slot on node n under parent entry p and links it into the node list.
func (t *tree) newEntry(n int32, slot uint16, p int32) int32 {
	var e int32
	if t.freeEntry != nilIdx {
		e = t.freeEntry
		t.freeEntry = t.entries.at(e).wNext
	} else {
		e, _ = t.entries.grow()
	}
	nd := t.nodes.at(n)
	depth := int32(0)
	if p != nilIdx {
		depth = t.entries.at(p).depth + 1
	}
	*t.entries.at(e) = entry{node: n, parent: p, depth: depth, slot: slot, wPrev: nilIdx, wNext: nilIdx, nNext: nd.entries}
	nd.entries = e
	t.liveEntries++
	return e
}

// dropEntry unlinks e from its node (a walk of the node's entries: at most one per worker) and returns
// it to the free list; it then frees the node if it is unused. The caller has already taken e off the
// leaf list and cleared its bit.
func (t *tree) dropEntry(e int32) {
	en := t.entries.at(e)
	n := en.node
	nd := t.nodes.at(n)
	if nd.entries == e {
		nd.entries = en.nNext
	} else {
		for p := nd.entries; p != nilIdx; p = t.entries.at(p).nNext {
			if t.entries.at(p).nNext == e {
				t.entries.at(p).nNext = en.nNext
				break
			}
		}
	}
	*en = entry{node: nilIdx, parent: nilIdx, wNext: t.freeEntry, flags: fFree}
	t.freeEntry = e
	t.liveEntries--
	t.maybeFreeNode(n)
}

// findEntry returns the entry of slot on node n.
func (t *tree) findEntry(n int32, slot uint16) int32 {
	for e := t.nodes.at(n).entries; e != nilIdx; e = t.entries.at(e).nNext {
		if t.entries.at(e).slot == slot {
			return e
		}
	}
	return nilIdx
}
