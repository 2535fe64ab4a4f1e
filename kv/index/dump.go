package index

import (
	"context"

	"github.com/kvroute/kvroute/kv"
)

// Dump returns the blocks worker k holds as stored blocks, parents before children, such that Store
// of the result into an empty index for k reproduces every lookup result for k (a snapshot for a new
// replica, DESIGN.md §9, like Dynamo's DumpTree). Blocks under a removed block (a placeholder) are left
// out: they cannot count until the worker stores that block again, and then its engine will resend
// them only if they were evicted meanwhile. A block held under several engine hashes appears once per
// hash. The order is deterministic for a given index state. ctx is not consulted.
func (x *Index) Dump(ctx context.Context, k WorkerKey) []StoredBlock {
	x.mu.RLock()
	defer x.mu.RUnlock()
	w := x.workers[k]
	if w == nil {
		return nil
	}
	t := &x.t
	out := make([]StoredBlock, 0, w.held)
	const emitted, omitted = 1, 2
	state := make(map[int32]uint8, w.held+w.ghosts)
	var stack []int32
	w.byEngine.each(func(_ kv.EngineHash, e int32) {
		// Walk up to the first entry already decided (or the root), then decide top-down.
		stack = stack[:0]
		for c := e; c != nilIdx; c = t.entries.at(c).parent {
			if state[c] != 0 {
				break
			}
			stack = append(stack, c)
		}
		for i := len(stack) - 1; i >= 0; i-- {
			c := stack[i]
			en := t.entries.at(c)
			p := en.parent
			if en.flags&fHeld == 0 || (p != nilIdx && state[p] != emitted) {
				state[c] = omitted
				continue
			}
			state[c] = emitted
			b := StoredBlock{EngineHash: en.engine, LocalHash: t.nodes.at(en.node).hash}
			if p != nilIdx {
				b.Parent, b.HasParent = t.entries.at(p).engine, true
			}
			out = append(out, b)
			for _, h := range w.extra[c] {
				b.EngineHash = h
				out = append(out, b)
			}
		}
	})
	return out
}
