package caddymodule

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/routing/model"
)

// TestTokenizeCacheMetricsKeptAcrossReload loads the test model twice, as two config loads do
// (the new config provisioned, then the old one cleaned up), and checks that the tokenize cache counters continue from the first cache's counts, that the
// bytes gauge is the current cache's, and that tokenize_cache_size 0 turns the cache off.
func TestTokenizeCacheMetricsKeptAcrossReload(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(tokenizeCacheCollector{kvMetrics.tokenizeCaches}); err != nil {
		t.Fatal(err)
	}
	gather := func() (hits, misses, bytes float64) {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			v := mf.GetMetric()[0]
			switch mf.GetName() {
			case "caddy_kvroute_tokenize_cache_hits_total":
				hits = v.GetCounter().GetValue()
			case "caddy_kvroute_tokenize_cache_misses_total":
				misses = v.GetCounter().GetValue()
			case "caddy_kvroute_tokenize_cache_bytes":
				bytes = v.GetGauge().GetValue()
			}
		}
		return
	}
	h0, m0, _ := gather()
	text := strings.Repeat("A system prompt long enough to be cached as one segment. ", 4)
	reload := reloader(t)
	load := func(size *int64) *model.Model {
		m, err := model.Load("../testdata/golden/qwen3vl-test-model")
		if err != nil {
			t.Fatal(err)
		}
		// a changed size: a new cache, whatever the tokenizer files
		reload(&App{RoutingConfig: RoutingConfig{ModelDir: "../testdata/golden/qwen3vl-test-model", TokenizeCacheSize: size}}).setTokenizeCache(m)
		return m
	}
	m1 := load(nil)
	m1.Tokenizer.Encode(text)
	m1.Tokenizer.Encode(text)
	if h, m, b := gather(); h-h0 != 1 || m-m0 != 1 || b <= 0 {
		t.Fatalf("first cache: %v hits, %v misses, %v bytes; want 1, 1, > 0", h-h0, m-m0, b)
	}
	other := int64(64 << 20)
	m2 := load(&other) // a reload: a new cache
	m2.Tokenizer.Encode(text)
	if h, m, _ := gather(); h-h0 != 1 || m-m0 != 2 {
		t.Fatalf("after the reload: %v hits, %v misses; want 1 and 2 (counts kept)", h-h0, m-m0)
	}
	off := int64(0)
	m3 := load(&off)
	if m3.Tokenizer.SegmentCache() != nil {
		t.Fatal("tokenize_cache_size 0 should leave the tokenizer without a cache")
	}
	m3.Tokenizer.Encode(text)
	if h, m, b := gather(); h-h0 != 1 || m-m0 != 2 || b != 0 {
		t.Fatalf("cache off: %v hits, %v misses, %v bytes; want 1, 2, 0", h-h0, m-m0, b)
	}
}

// TestTokenizeCacheKeptAcrossReload: a reload whose tokenizer files are byte for byte the same and
// whose size is unchanged keeps the segment cache (the operator test saw every reload empty it: a
// 2.8 MB prompt took 17 ms before a reload and 106 ms after); a changed size or a changed
// tokenizer file starts an empty one.
func TestTokenizeCacheKeptAcrossReload(t *testing.T) {
	dir := t.TempDir()
	src := "../testdata/golden/qwen3vl-test-model"
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	reload := reloader(t)
	load := func(size *int64) *model.Model {
		t.Helper()
		m, err := model.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		reload(&App{RoutingConfig: RoutingConfig{ModelDir: dir, TokenizeCacheSize: size}}).setTokenizeCache(m)
		return m
	}
	text := strings.Repeat("A document long enough to be cached as one segment of the prompt. ", 8)
	m1 := load(nil)
	want := m1.Tokenizer.Encode(text)
	c1 := m1.Tokenizer.SegmentCache()
	if c1 == nil || c1.Stats().Misses != 1 {
		t.Fatalf("first load: cache %v", c1)
	}

	m2 := load(nil) // a reload with the same files and size
	if m2.Tokenizer.SegmentCache() != c1 {
		t.Fatal("a reload with the same tokenizer files and size did not keep the cache")
	}
	if got := m2.Tokenizer.Encode(text); !slices.Equal(got, want) || c1.Stats().Hits != 1 {
		t.Fatalf("after the reload: ids equal %v, hits %d; want the same ids from a hit", slices.Equal(got, want), c1.Stats().Hits)
	}

	other := int64(64 << 20)
	m3 := load(&other) // a changed size: a new cache
	if c3 := m3.Tokenizer.SegmentCache(); c3 == nil || c3 == c1 {
		t.Fatalf("a changed tokenize_cache_size kept the old cache (%p)", c3)
	}

	m4 := load(&other) // same again: kept
	c4 := m4.Tokenizer.SegmentCache()
	if c4 != m3.Tokenizer.SegmentCache() {
		t.Fatal("a reload with the same files and the new size did not keep the cache")
	}
	cfg := filepath.Join(dir, "tokenizer_config.json")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	m5 := load(&other) // a changed tokenizer file: a new cache
	if c5 := m5.Tokenizer.SegmentCache(); c5 == nil || c5 == c4 {
		t.Fatal("a changed tokenizer_config.json kept the old cache")
	}
	if got := m5.Tokenizer.Encode(text); !slices.Equal(got, want) {
		t.Fatal("ids differ after the new cache")
	}
}

// reloader returns a function that provisions a config's shared caches as Caddy does on a reload:
// the new config takes its references, then the config it replaces is cleaned up. The last one is
// cleaned up when the test ends.
func reloader(t *testing.T) func(*App) *App {
	var prev *App
	t.Cleanup(func() {
		if prev != nil {
			_ = prev.Cleanup()
		}
	})
	return func(a *App) *App {
		t.Helper()
		if err := a.acquireCaches(); err != nil {
			t.Fatal(err)
		}
		if prev != nil {
			if err := prev.Cleanup(); err != nil {
				t.Fatal(err)
			}
		}
		prev = a
		return a
	}
}
