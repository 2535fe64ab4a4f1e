package lru

import "testing"

// TestBudgetAndRecency: entries are evicted least recently used first once the charges pass the
// budget; a lookup refreshes an entry; N must match; an entry over a quarter of the budget is
// not stored; Put keeps or replaces an entry of the same key; Charge grows an entry's charge,
// evicting others or dropping it when it passes a quarter of the budget.
func TestBudgetAndRecency(t *testing.T) {
	c := New[int, string](100)
	for k := range 4 {
		c.Put(&Entry[int, string]{Key: k, N: 1, Val: "v"}, 25, false)
	}
	if st := c.Stats(); st.Entries != 4 || st.Bytes != 100 {
		t.Fatalf("stats %+v", st)
	}
	if _, ok := c.Get(0, 1); !ok { // 0 is now the most recent
		t.Fatal("entry 0 missing")
	}
	if _, ok := c.Get(0, 2); ok {
		t.Fatal("a lookup with another N hit")
	}
	c.Put(&Entry[int, string]{Key: 4, N: 1}, 25, false) // evicts 1, the least recent
	if _, ok := c.Get(1, 1); ok {
		t.Fatal("entry 1 should have been evicted")
	}
	if _, ok := c.Get(0, 1); !ok {
		t.Fatal("entry 0 (refreshed) was evicted")
	}
	big := &Entry[int, string]{Key: 9, N: 1}
	if got := c.Put(big, 26, false); got != big || c.Stats().Entries != 4 {
		t.Fatal("an entry over a quarter of the budget was stored")
	}
	first, _ := c.Get(2, 1)
	if got := c.Put(&Entry[int, string]{Key: 2, N: 1, Val: "new"}, 10, true); got != first {
		t.Fatal("keep did not keep the held entry")
	}
	if got := c.Put(&Entry[int, string]{Key: 2, N: 1, Val: "new"}, 10, false); got == first || got.Val != "new" {
		t.Fatal("replace did not replace")
	}
	if st := c.Stats(); st.Bytes != 85 {
		t.Fatalf("bytes %d after replacing a 25-byte entry by a 10-byte one, want 85", st.Bytes)
	}
	e0, _ := c.Get(0, 1)
	c.Charge(e0, 30) // 55 > 25: dropped
	if _, ok := c.Get(0, 1); ok || c.Stats().Bytes != 60 {
		t.Fatalf("an entry charged past a quarter of the budget stays: %+v", c.Stats())
	}
	e2, _ := c.Get(2, 1)
	c.Charge(e2, 15)                                  // 25: kept
	c.Charge(&Entry[int, string]{Key: 2, N: 1}, 1000) // not the held entry: ignored
	if st := c.Stats(); st.Bytes != 75 || st.Hits == 0 || st.Misses == 0 {
		t.Fatalf("stats %+v, want 75 bytes", st)
	}
}
