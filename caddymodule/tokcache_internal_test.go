package caddymodule

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/routing/model"
)

// TestTokenizeCacheMetricsKeptAcrossReload loads the test model twice, as two config loads do,
// and checks that the tokenize cache counters continue from the first cache's counts, that the
// bytes gauge is the current cache's, and that tokenize_cache_size 0 turns the cache off.
func TestTokenizeCacheMetricsKeptAcrossReload(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(tokenizeCacheCollector{}); err != nil {
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
	load := func(size *int64) *model.Model {
		m, err := model.Load("../testdata/golden/qwen3vl-test-model")
		if err != nil {
			t.Fatal(err)
		}
		a := &App{RoutingConfig: RoutingConfig{TokenizeCacheSize: size}}
		a.setTokenizeCache(m)
		return m
	}
	m1 := load(nil)
	m1.Tokenizer.Encode(text)
	m1.Tokenizer.Encode(text)
	if h, m, b := gather(); h-h0 != 1 || m-m0 != 1 || b <= 0 {
		t.Fatalf("first cache: %v hits, %v misses, %v bytes; want 1, 1, > 0", h-h0, m-m0, b)
	}
	m2 := load(nil) // a reload: a new cache
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
