package index

// nilIdx marks a missing node or entry reference; rootNode is the radix root (the empty prefix).
const (
	nilIdx   int32 = -1
	rootNode int32 = 0
)

// Approximate sizes used by Stats (bytes).
const (
	nodeSize        = 32
	entrySize       = 48
	kidSlotBytes    = 40 // 16-byte key, 4-byte value, control byte, load factor
	engineSlotBytes = 24 // 8-byte key, 4-byte value, control byte, load factor
)

// node is one radix node: a block (by local hash) under its parent node. The root is node 0.
// A free node keeps its arena slot and is chained through parent.
type node struct {
	hash   uint64
	parent int32
	// child is one child kept inline (nilIdx when none); the node's other children are in tree.kids.
	child     int32
	nChildren int32
	// entries heads the list of (worker, node) entries, linked through entry.nNext/nPrev.
	entries int32
	// refs counts those entries.
	refs int32
}

// kidKey addresses a child by its parent node and local hash.
type kidKey struct {
	parent int32
	hash   uint64
}

// entry flags.
const (
	fHeld uint8 = 1 << iota // the worker holds the block (else a placeholder kept for descendants)
	fLeaf                   // on the leaf (eviction) lists
	fFree                   // on the free list
)

// entry is one worker's entry on one node. Invariant: at most one entry per (worker, node).
type entry struct {
	// engine is the entry's (first) engine hash while held.
	engine uint64
	node   int32
	// parent is the same worker's entry on the parent node, or nilIdx under the root.
	parent int32
	// childRefs counts the worker's entries on child nodes whose parent is this entry.
	childRefs int32
	// wPrev/wNext link the worker's leaf list (wNext also chains free entries);
	// gPrev/gNext the global leaf list; nPrev/nNext the node's entry list.
	wPrev, wNext int32
	gPrev, gNext int32
	nPrev, nNext int32
	slot         uint16
	flags        uint8
}

// tree holds the arenas. Its fields are protected by Index.mu.
type tree struct {
	nodes    []node
	freeNode int32
	kids     map[kidKey]int32
	// bits holds stride words per node: bit s set when the worker in slot s holds the node.
	bits   []uint64
	stride int

	entries   []entry
	freeEntry int32
	// gHead/gTail is the global list of evictable leaves, oldest first.
	gHead, gTail int32

	liveNodes, liveEntries int
}

func (t *tree) init() {
	t.nodes = []node{{parent: nilIdx, child: nilIdx, entries: nilIdx}}
	t.freeNode = nilIdx
	t.kids = make(map[kidKey]int32)
	t.stride = 1
	t.bits = make([]uint64, 1)
	t.freeEntry = nilIdx
	t.gHead, t.gTail = nilIdx, nilIdx
}

// growStride re-lays the bitsets with stride words per node.
func (t *tree) growStride(stride int) {
	nb := make([]uint64, len(t.nodes)*stride, cap(t.nodes)*stride)
	for n := range t.nodes {
		copy(nb[n*stride:], t.bits[n*t.stride:(n+1)*t.stride])
	}
	t.bits, t.stride = nb, stride
}

// child returns the child of p with local hash h.
func (t *tree) child(p int32, h uint64) (int32, bool) {
	pn := &t.nodes[p]
	if c := pn.child; c != nilIdx {
		if t.nodes[c].hash == h {
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
func (t *tree) addChild(p int32, h uint64) int32 {
	var c int32
	if t.freeNode != nilIdx {
		c = t.freeNode
		t.freeNode = t.nodes[c].parent
	} else {
		c = int32(len(t.nodes))
		t.nodes = append(t.nodes, node{})
		for range t.stride {
			t.bits = append(t.bits, 0)
		}
	}
	t.nodes[c] = node{hash: h, parent: p, child: nilIdx, entries: nilIdx}
	pn := &t.nodes[p]
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
		nd := &t.nodes[n]
		if nd.refs != 0 || nd.nChildren != 0 {
			return
		}
		p := nd.parent
		pn := &t.nodes[p]
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
	t.bits[int(n)*t.stride+int(slot/64)] |= 1 << (slot % 64)
}

func (t *tree) clearBit(n int32, slot uint16) {
	t.bits[int(n)*t.stride+int(slot/64)] &^= 1 << (slot % 64)
}

func (t *tree) hasBit(n int32, slot uint16) bool {
	return t.bits[int(n)*t.stride+int(slot/64)]&(1<<(slot%64)) != 0
}

// newEntry allocates an entry for slot on node n under parent entry p and links it into the node list.
func (t *tree) newEntry(n int32, slot uint16, p int32) int32 {
	var e int32
	if t.freeEntry != nilIdx {
		e = t.freeEntry
		t.freeEntry = t.entries[e].wNext
	} else {
		e = int32(len(t.entries))
		t.entries = append(t.entries, entry{})
	}
	nd := &t.nodes[n]
	t.entries[e] = entry{node: n, parent: p, slot: slot, wPrev: nilIdx, wNext: nilIdx,
		gPrev: nilIdx, gNext: nilIdx, nPrev: nilIdx, nNext: nd.entries}
	if nd.entries != nilIdx {
		t.entries[nd.entries].nPrev = e
	}
	nd.entries = e
	nd.refs++
	t.liveEntries++
	return e
}

// dropEntry unlinks e from its node and returns it to the free list; it then frees the node if it is
// unused. The caller has already taken e off the leaf lists and cleared its bit.
func (t *tree) dropEntry(e int32) {
	en := &t.entries[e]
	n := en.node
	nd := &t.nodes[n]
	if en.nPrev != nilIdx {
		t.entries[en.nPrev].nNext = en.nNext
	} else {
		nd.entries = en.nNext
	}
	if en.nNext != nilIdx {
		t.entries[en.nNext].nPrev = en.nPrev
	}
	nd.refs--
	*en = entry{node: nilIdx, parent: nilIdx, wNext: t.freeEntry, flags: fFree}
	t.freeEntry = e
	t.liveEntries--
	t.maybeFreeNode(n)
}

// findEntry returns the entry of slot on node n.
func (t *tree) findEntry(n int32, slot uint16) int32 {
	for e := t.nodes[n].entries; e != nilIdx; e = t.entries[e].nNext {
		if t.entries[e].slot == slot {
			return e
		}
	}
	return nilIdx
}
