package index

import "github.com/kvroute/kvroute/kv"

// This file applies events. Every function here expects Index.mu held for writing on entry.

// storeLocked applies one stored block for w. Lock should be held on entry.
func (x *Index) storeLocked(w *worker, b *StoredBlock) *UnknownParentError {
	t := &x.t
	if b.HasParent && b.Parent == b.EngineHash {
		return nil // self-referencing store: Dynamo turns it into an empty removal
	}
	pNode, pEntry := rootNode, nilIdx
	if b.HasParent {
		pe, ok := w.byEngine.get(b.Parent)
		if !ok {
			return &UnknownParentError{Worker: w.key, Parent: b.Parent}
		}
		pNode, pEntry = t.entries.at(pe).node, pe
	}
	if old, ok := w.byEngine.get(b.EngineHash); ok {
		on := t.entries.at(old).node
		if t.nodes.at(on).parent == pNode && t.nodes.at(on).hash == b.LocalHash {
			stampLocked(w, t.entries.at(old))
			x.touchLocked(w, old)
			return nil
		}
		// The engine hash moved: drop the old position first. pEntry is held, so this never frees it.
		x.removeEngineLocked(w, b.EngineHash)
	}
	n, ok := t.child(pNode, b.LocalHash)
	if !ok {
		n = t.addChild(pNode, b.LocalHash)
	}
	switch {
	case t.hasBit(n, w.slot):
		// Held already under another engine hash: remember this one too.
		e := t.findEntry(n, w.slot)
		if w.extra == nil {
			w.extra = make(map[int32][]kv.EngineHash)
		}
		w.extra[e] = append(w.extra[e], b.EngineHash)
		w.byEngine.put(b.EngineHash, e)
		stampLocked(w, t.entries.at(e))
		x.touchLocked(w, e)
		return nil
	case w.ghosts > 0:
		if e := t.findEntry(n, w.slot); e != nilIdx {
			// Revive the placeholder: its descendants count again.
			en := t.entries.at(e)
			en.engine = b.EngineHash
			en.flags |= fHeld
			stampLocked(w, en)
			w.ghosts--
			w.held++
			w.maxHeld = max(w.maxHeld, w.held)
			w.byEngine.put(b.EngineHash, e)
			t.setBit(n, w.slot)
			return nil
		}
	}
	e := t.newEntry(n, w.slot, pEntry)
	en := t.entries.at(e)
	en.engine = b.EngineHash
	en.flags = fHeld
	stampLocked(w, en)
	w.byEngine.put(b.EngineHash, e)
	w.held++
	w.maxHeld = max(w.maxHeld, w.held)
	t.setBit(n, w.slot)
	if pEntry != nilIdx {
		pe := t.entries.at(pEntry)
		pe.childRefs++
		if pe.flags&fLeaf != 0 {
			x.unlinkLeafLocked(w, pEntry)
		}
	}
	x.pushLeafLocked(w, e, false)
	return nil
}

// touchLocked moves a leaf to the newest end of the eviction order. Lock should be held on entry.
func (x *Index) touchLocked(w *worker, e int32) {
	if x.t.entries.at(e).flags&fLeaf != 0 {
		x.unlinkLeafLocked(w, e)
		x.pushLeafLocked(w, e, false)
	}
}

// removeEngineLocked drops one engine hash of w and reports whether it was known.
// Lock should be held on entry.
func (x *Index) removeEngineLocked(w *worker, h kv.EngineHash) bool {
	t := &x.t
	e, ok := w.byEngine.get(h)
	if !ok {
		return false
	}
	w.byEngine.del(h)
	en := t.entries.at(e)
	if more := w.extra[e]; len(more) > 0 {
		// The block stays held under its other engine hashes.
		if en.engine == h {
			en.engine = more[0]
			more = more[1:]
		} else {
			for i, m := range more {
				if m == h {
					more = append(more[:i:i], more[i+1:]...)
					break
				}
			}
		}
		if len(more) == 0 {
			delete(w.extra, e)
		} else {
			w.extra[e] = more
		}
		return true
	}
	x.unholdLocked(w, e)
	return true
}

// unholdLocked turns a held entry (whose engine hashes are already gone from byEngine) into a
// placeholder when it has descendants, else frees it and then any ancestors left without a purpose.
// Lock should be held on entry.
func (x *Index) unholdLocked(w *worker, e int32) {
	t := &x.t
	en := t.entries.at(e)
	t.clearBit(en.node, w.slot)
	en.flags &^= fHeld
	w.held--
	if en.childRefs > 0 {
		w.ghosts++
		return
	}
	x.releaseLocked(w, e)
}

// releaseLocked frees a childless, unheld entry e and walks up: a parent left without children becomes
// a leaf again (the oldest one: it is older than the child just dropped) or, if it is a placeholder, is
// freed too. Lock should be held on entry.
func (x *Index) releaseLocked(w *worker, e int32) {
	t := &x.t
	for e != nilIdx {
		if t.entries.at(e).flags&fLeaf != 0 {
			x.unlinkLeafLocked(w, e)
		}
		p := t.entries.at(e).parent
		t.dropEntry(e)
		if p == nilIdx {
			return
		}
		pe := t.entries.at(p)
		pe.childRefs--
		if pe.childRefs > 0 {
			return
		}
		if pe.flags&fHeld != 0 {
			x.pushLeafLocked(w, p, true)
			return
		}
		w.ghosts--
		e = p
	}
}

// pushLeafLocked puts e on the worker's leaf list, at the oldest end when oldest is set (a parent
// whose last child went: it is older than that child), else at the newest end with a fresh stamp.
// Lock should be held on entry.
func (x *Index) pushLeafLocked(w *worker, e int32, oldest bool) {
	t := &x.t
	en := t.entries.at(e)
	en.flags |= fLeaf
	if oldest {
		en.wPrev, en.wNext = nilIdx, w.leafHead
		if w.leafHead != nilIdx {
			t.entries.at(w.leafHead).wPrev = e
		} else {
			w.leafTail = e
		}
		w.leafHead = e
		return
	}
	x.clock++
	en.stamp = x.clock
	en.wPrev, en.wNext = w.leafTail, nilIdx
	if w.leafTail != nilIdx {
		t.entries.at(w.leafTail).wNext = e
	} else {
		w.leafHead = e
	}
	w.leafTail = e
}

// unlinkLeafLocked takes e off the worker's leaf list. Lock should be held on entry.
func (x *Index) unlinkLeafLocked(w *worker, e int32) {
	t := &x.t
	en := t.entries.at(e)
	en.flags &^= fLeaf
	if en.wPrev != nilIdx {
		t.entries.at(en.wPrev).wNext = en.wNext
	} else {
		w.leafHead = en.wNext
	}
	if en.wNext != nilIdx {
		t.entries.at(en.wNext).wPrev = en.wPrev
	} else {
		w.leafTail = en.wPrev
	}
	en.wPrev, en.wNext = nilIdx, nilIdx
}

// evictLocked drops the leaf e of w with all its engine hashes. Lock should be held on entry.
func (x *Index) evictLocked(w *worker, e int32) {
	en := x.t.entries.at(e)
	w.byEngine.del(en.engine)
	for _, h := range w.extra[e] {
		w.byEngine.del(h)
	}
	delete(w.extra, e)
	x.unholdLocked(w, e)
	x.evictions++
}

// enforceCapsLocked evicts the oldest leaves of w while it is over its cap, then, while the index is
// over the total cap, the oldest of the workers' oldest leaves (by stamp; a scan over the workers, so
// O(workers) per evicted block). Lock should be held on entry.
func (x *Index) enforceCapsLocked(w *worker) {
	for w.held+w.ghosts > x.cfg.MaxBlocksPerWorker && w.leafHead != nilIdx {
		x.evictLocked(w, w.leafHead)
	}
	for x.t.liveEntries > x.cfg.MaxBlocks {
		var victim *worker
		var vs uint32
		for _, o := range x.slots {
			if o == nil || o.leafHead == nilIdx {
				continue
			}
			if s := x.t.entries.at(o.leafHead).stamp; victim == nil || int32(s-vs) < 0 {
				victim, vs = o, s
			}
		}
		if victim == nil {
			return
		}
		x.evictLocked(victim, victim.leafHead)
	}
}

// purgeLocked drops every entry of w; w stays registered. Lock should be held on entry.
func (x *Index) purgeLocked(w *worker) {
	t := &x.t
	w.byEngine.each(func(_ kv.EngineHash, e int32) {
		// Free e and the placeholders above it; held ancestors are reached through byEngine.
		for e != nilIdx && t.entries.at(e).flags&fFree == 0 {
			en := t.entries.at(e)
			if en.flags&fLeaf != 0 {
				x.unlinkLeafLocked(w, e)
			}
			if en.flags&fHeld != 0 {
				t.clearBit(en.node, w.slot)
			}
			p := en.parent
			t.dropEntry(e)
			if p == nilIdx || t.entries.at(p).flags&(fHeld|fFree) != 0 {
				break
			}
			e = p
		}
	})
	w.byEngine = engineMap{}
	w.extra = nil
	w.held, w.ghosts = 0, 0
	w.leafHead, w.leafTail = nilIdx, nilIdx
}
