package caddymodule

import (
	"testing"
)

// TestSharedPoolReload follows sharedPool's references through a reload as Caddy makes one (the
// new config provisioned, then the old one cleaned up): the new config shares the old one's
// caches, response map and media budget, and once every config is cleaned up no entry is left and
// the cache counts hold no live cache.
func TestSharedPoolReload(t *testing.T) {
	const dir = "../testdata/golden/qwen3vl-test-model"
	provision := func() *App {
		t.Helper()
		a := &App{RoutingConfig: RoutingConfig{ModelDir: dir}, metrics: kvMetrics}
		for _, f := range []func() error{a.acquireResponses, a.acquireBudget, a.acquireCaches} {
			if err := f(); err != nil {
				t.Fatal(err)
			}
		}
		return a
	}
	old := provision()
	keys := append([]string(nil), old.shared.keys...)
	if len(keys) != 4 {
		t.Fatalf("keys %v, want the response map, the media budget and two caches", keys)
	}
	for _, k := range keys {
		if n, ok := sharedPool.References(k); !ok || n != 1 {
			t.Fatalf("%s: %d references (%v), want 1", k, n, ok)
		}
	}
	cur := provision() // the reload: the same settings
	if cur.shared.message != old.shared.message || cur.shared.tokenize != old.shared.tokenize ||
		cur.shared.mediaBudget != old.shared.mediaBudget || cur.responses != old.responses || cur.shared.message == nil {
		t.Fatal("a reload with the same settings did not share the caches, the budget and the response map")
	}
	for _, k := range keys {
		if n, _ := sharedPool.References(k); n != 2 {
			t.Fatalf("%s: %d references during the reload, want 2", k, n)
		}
	}
	if err := old.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if err := old.Cleanup(); err != nil { // Caddy may call it again: nothing is released twice
		t.Fatal(err)
	}
	for _, k := range keys {
		if n, _ := sharedPool.References(k); n != 1 {
			t.Fatalf("%s: %d references after the old config's cleanup, want 1", k, n)
		}
	}
	if err := cur.Cleanup(); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if _, ok := sharedPool.References(k); ok {
			t.Errorf("%s still pooled after the last cleanup", k)
		}
	}
	for _, c := range []*cacheCounts{kvMetrics.tokenizeCaches, kvMetrics.messageCaches} {
		c.mu.Lock()
		n := len(c.live)
		c.mu.Unlock()
		if n != 0 {
			t.Errorf("%d live caches counted after the last cleanup", n)
		}
	}
}
