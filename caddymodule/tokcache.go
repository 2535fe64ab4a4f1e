package caddymodule

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/routing/model"
	"github.com/kvroute/kvroute/routing/tokenizer"
)

// tokenizeCacheSize is the segment cache budget in bytes: the default when unset, none when 0.
func (rc *RoutingConfig) tokenizeCacheSize() int64 {
	if rc.TokenizeCacheSize == nil {
		return tokenizer.DefaultSegmentCacheBytes
	}
	return *rc.TokenizeCacheSize
}

// setTokenizeCache gives the freshly loaded model's tokenizer its segment cache (before the
// model is shared) and points the metrics at it.
func (a *App) setTokenizeCache(m *model.Model) {
	c := tokenizer.NewSegmentCache(a.tokenizeCacheSize())
	m.Tokenizer.SetSegmentCache(c)
	tokenizeCacheMu.Lock()
	defer tokenizeCacheMu.Unlock()
	if old := currentTokenizeCache.Swap(c); old != nil {
		st := old.Stats()
		retiredHits.Add(st.Hits)
		retiredMisses.Add(st.Misses)
	}
}

// currentTokenizeCache is the segment cache of the most recently loaded config, read at scrape
// time. A reload loads the model again with a new cache; the counts of the replaced cache are
// kept in retiredHits and retiredMisses so the counters do not reset (lookups the old config
// still serves during the switch-over are not counted).
var (
	currentTokenizeCache       atomic.Pointer[tokenizer.SegmentCache]
	tokenizeCacheMu            sync.Mutex // serializes swaps
	retiredHits, retiredMisses atomic.Uint64
)

// tokenizeCacheCollector exports the segment cache's counters:
// caddy_kvroute_tokenize_cache_{hits_total,misses_total,bytes}.
type tokenizeCacheCollector struct{}

var (
	tokenizeCacheHits = prometheus.NewDesc("caddy_kvroute_tokenize_cache_hits_total",
		"Prompt segments (text between added tokens, at least 64 bytes) whose ids came from the tokenize cache.", nil, nil)
	tokenizeCacheMisses = prometheus.NewDesc("caddy_kvroute_tokenize_cache_misses_total",
		"Prompt segments (at least 64 bytes) tokenized because the tokenize cache did not hold them.", nil, nil)
	tokenizeCacheBytes = prometheus.NewDesc("caddy_kvroute_tokenize_cache_bytes",
		"Bytes held by the tokenize cache (4 per token id plus a fixed per-entry overhead).", nil, nil)
)

func (tokenizeCacheCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- tokenizeCacheHits
	ch <- tokenizeCacheMisses
	ch <- tokenizeCacheBytes
}

func (tokenizeCacheCollector) Collect(ch chan<- prometheus.Metric) {
	st := currentTokenizeCache.Load().Stats() // nil cache: zeros
	ch <- prometheus.MustNewConstMetric(tokenizeCacheHits, prometheus.CounterValue, float64(retiredHits.Load()+st.Hits))
	ch <- prometheus.MustNewConstMetric(tokenizeCacheMisses, prometheus.CounterValue, float64(retiredMisses.Load()+st.Misses))
	ch <- prometheus.MustNewConstMetric(tokenizeCacheBytes, prometheus.GaugeValue, float64(st.Bytes))
}
