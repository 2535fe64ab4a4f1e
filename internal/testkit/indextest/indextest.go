// Package indextest compares KV block indexes in tests: two replicas fed the same events, or an
// index built through NATS and one built from the same events applied directly, must hold the
// same blocks. Only tests import it.
package indextest

import (
	"cmp"
	"context"
	"slices"
	"testing"

	"github.com/kvroute/kvroute/kv/index"
)

// SameWorker checks that worker gk in got holds the blocks worker wk holds in want, block for
// block: their dumps (index.Index.Dump: engine hash, parent, local hash of every block a lookup can
// count) sorted by engine hash are equal. It reports the first difference with tb.Errorf and
// returns false, or returns true.
func SameWorker(tb testing.TB, got *index.Index, gk index.WorkerKey, want *index.Index, wk index.WorkerKey) bool {
	tb.Helper()
	g, w := SortedDump(got, gk), SortedDump(want, wk)
	if slices.Equal(g, w) {
		return true
	}
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			tb.Errorf("worker %s holds %d blocks, reference %s %d; sorted entry %d differs: %+v, reference %+v", gk, len(g), wk, len(w), i, g[i], w[i])
			return false
		}
	}
	tb.Errorf("worker %s holds %d blocks, reference %s %d", gk, len(g), wk, len(w))
	return false
}

// SortedDump returns ix.Dump of worker k sorted by engine hash (Dump's order depends on the
// order blocks were stored in).
func SortedDump(ix *index.Index, k index.WorkerKey) []index.StoredBlock {
	d := ix.Dump(context.Background(), k)
	slices.SortFunc(d, func(a, b index.StoredBlock) int { return cmp.Compare(a.EngineHash, b.EngineHash) })
	return d
}
