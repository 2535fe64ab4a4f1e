package scheduler_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/zeebo/xxh3"

	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/routing/scheduler"
)

func keyOf(i int) [16]byte { return xxh3.HashString128(fmt.Sprintf("clip-%d", i)).Bytes() }

// firstOf returns the id each of n keys ranks first among ids.
func firstOf(n int, ids []string) []string {
	out := make([]string, n)
	for k := range n {
		out[k] = ids[scheduler.RendezvousOrder(keyOf(k), ids)[0]]
	}
	return out
}

// TestRendezvousOrder: the choice does not depend on the order of the worker list; a worker that
// leaves moves only the keys it ranked first (each to its own second choice), a worker that joins
// takes keys only from others; and 4000 keys spread over 5 workers within ±20 % of 800 each.
func TestRendezvousOrder(t *testing.T) {
	ids := []string{"sim-1", "sim-2", "sim-3", "sim-4", "sim-5"}
	const n = 4000
	base := firstOf(n, ids)
	rev := slices.Clone(ids)
	slices.Reverse(rev)
	if got := firstOf(n, rev); !slices.Equal(got, base) {
		t.Fatal("the rendezvous choice depends on the order of the worker list")
	}
	counts := map[string]int{}
	for _, w := range base {
		counts[w]++
	}
	for _, id := range ids {
		if counts[id] < 640 || counts[id] > 960 {
			t.Errorf("%s ranks first for %d of %d keys, want 800 ± 20 %%: %v", id, counts[id], n, counts)
		}
	}
	left := []string{"sim-1", "sim-2", "sim-4", "sim-5"} // sim-3 leaves
	after := firstOf(n, left)
	moved := 0
	for k := range n {
		switch {
		case base[k] == "sim-3":
			moved++
			if second := ids[scheduler.RendezvousOrder(keyOf(k), ids)[1]]; after[k] != second {
				t.Fatalf("key %d moved from sim-3 to %s, not to its second choice %s", k, after[k], second)
			}
		case after[k] != base[k]:
			t.Fatalf("key %d moved from %s to %s although %s stayed", k, base[k], after[k], base[k])
		}
	}
	if moved != counts["sim-3"] {
		t.Errorf("%d keys moved, sim-3 held %d", moved, counts["sim-3"])
	}
	// Joining again: exactly sim-3's keys come back.
	if got := firstOf(n, append(left, "sim-3")); !slices.Equal(got, base) {
		t.Error("a worker that rejoins does not get its keys back")
	}
}

// TestAffinityCredit: 4 idle workers, a 100-token request (block size 16) whose media the router
// did not decode (1024 estimated tokens), default model (ttft2, whose in-flight bound is
// ceil(1.5 · (0 + 1) / 4) = 1 on idle workers). The key's rendezvous worker gets the affinity term and
// cost 100 − 1024 = −924, the others 100; it is picked. Unavailable or over the load bound, the
// credit goes to the next worker in rendezvous order. Linear: 1024/16 = 64 prefill blocks.
func TestAffinityCredit(t *testing.T) {
	ws := []index.WorkerKey{w1, w2, w3, {ID: "w5"}}
	ids := []string{"w1", "w2", "w3", "w5"}
	key := keyOf(7)
	order := scheduler.RendezvousOrder(key, ids)
	req := scheduler.Request{Tokens: 100, BlockSize: 16, Affinity: &scheduler.Affinity{Key: key, Tokens: 1024}}
	cands := func() []scheduler.Candidate {
		out := make([]scheduler.Candidate, len(ws))
		for i, w := range ws {
			out[i] = cand(w, 0)
		}
		return out
	}
	s := newSched(t, nil, 1)
	d, err := s.Select(req, cands())
	if err != nil {
		t.Fatal(err)
	}
	first := ws[order[0]]
	if d.Worker != first || d.AffinityWorker != first || d.Cost != -924 {
		t.Fatalf("picked %v (affinity %v, cost %v), want %v at -924", d.Worker, d.AffinityWorker, d.Cost, first)
	}
	for i, c := range d.Candidates {
		want := scheduler.Terms{UncachedTokens: 100, InFlightBound: 1}
		if i == order[0] {
			want.Affinity = 1024
		}
		if c.Terms != want || d.Costs[c.Worker] != c.Cost {
			t.Errorf("%v: terms %+v cost %v, want %+v", c.Worker, c.Terms, c.Cost, want)
		}
	}
	// Text overlap still counts: another worker holding 5 of the 6 blocks (80 tokens) costs 20,
	// still above the credited −924 (the media outweighs a short text prefix).
	cs := cands()
	cs[order[1]].OverlapBlocks = 5
	if d, _ = s.Select(req, cs); d.Worker != first || d.Costs[ws[order[1]]] != 20 {
		t.Errorf("with text overlap elsewhere: picked %v, costs %v", d.Worker, d.Costs)
	}
	// The rendezvous worker down: the next in order.
	cs = cands()
	cs[order[0]].Available = false
	if d, _ = s.Select(req, cs); d.Worker != ws[order[1]] || d.Candidates[order[0]].Terms.Affinity != 0 {
		t.Errorf("first down: picked %v, want %v", d.Worker, ws[order[1]])
	}
	// Over the load bound: one request in flight on the first (1 + 1 over
	// ceil(1.5 · (1 + 1) / 4) = 1), so the credit goes to the second.
	d, _ = s.Select(req, cands())
	s.Begin(d).FirstByte()
	d, _ = s.Select(req, cands())
	if c := d.Candidates[order[0]]; !c.OverBalance || c.Terms.Affinity != 0 || d.Worker != ws[order[1]] || d.AffinityWorker != ws[order[1]] {
		t.Errorf("first over the bound: picked %v (affinity %v), first %+v", d.Worker, d.AffinityWorker, c)
	}
	// Linear: the credit in prefill blocks.
	d, _ = newSched(t, linear(), 1).Select(req, cands())
	if c := d.Candidates[order[0]]; c.Terms.Affinity != 64 || d.Worker != first {
		t.Errorf("linear: picked %v, first %+v", d.Worker, c)
	}
	// affinity off: the request's affinity is ignored, every cost 100.
	off := scheduler.DefaultConfig()
	off.AffinityOff = true
	d, _ = newSched(t, off, 1).Select(req, cands())
	for _, c := range d.Candidates {
		if c.Terms.Affinity != 0 || c.Cost != 100 || d.AffinityWorker != (index.WorkerKey{}) {
			t.Errorf("affinity off: %v terms %+v cost %v, affinity worker %v", c.Worker, c.Terms, c.Cost, d.AffinityWorker)
		}
	}
	// No affinity: every cost 100, a tie.
	req.Affinity = nil
	if d, _ = s.Select(req, cands()); d.AffinityWorker != (index.WorkerKey{}) {
		t.Errorf("no affinity: credited %v", d.AffinityWorker)
	}
}
