package caddymodule

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/internal/jinja"
	"github.com/kvroute/kvroute/routing/chat"
	"github.com/kvroute/kvroute/routing/model"
)

// templateCacheSize is the message cache budget in bytes: the default when unset, none when 0.
func (rc *RoutingConfig) templateCacheSize() int64 {
	if rc.TemplateCacheSize == nil {
		return chat.DefaultMessageCacheBytes
	}
	return *rc.TemplateCacheSize
}

// setMessageCache gives the freshly loaded model's chat template its message cache (before the
// model is shared) and points the metrics at it. A config reload keeps the cache of the config
// it replaces when the size is unchanged: an entry is a message's JSON text converted to
// template values, which depends on no file (the content format, the one template property it
// depends on, is part of its key), and the iterations a replaced template recorded are never
// replayed by another template (they are keyed by its loop nodes).
func (a *App) setMessageCache(m *model.Model) {
	size := a.templateCacheSize()
	messageCacheMu.Lock()
	defer messageCacheMu.Unlock()
	if m.Template == nil {
		return // a model folder without a chat template: completions only, nothing to cache
	}
	if cur := currentMessageCache.Load(); cur != nil && cur.Stats().MaxBytes == size {
		m.Template.SetMessageCache(cur)
		return
	}
	c := chat.NewMessageCache(size)
	m.Template.SetMessageCache(c)
	if old := currentMessageCache.Swap(c); old != nil {
		st := old.Stats()
		retiredMessageHits.Add(st.Hits)
		retiredMessageMisses.Add(st.Misses)
	}
}

// currentMessageCache is the message cache of the most recently loaded config, read at scrape
// time; the counts of a replaced cache are kept in retiredMessage* so the counters do not reset.
var (
	currentMessageCache                      atomic.Pointer[chat.MessageCache]
	messageCacheMu                           sync.Mutex // serializes swaps
	retiredMessageHits, retiredMessageMisses atomic.Uint64
)

// templateCacheCollector exports the message cache's counters and the template engine's
// replays: caddy_kvroute_template_cache_{hits_total,misses_total,bytes} and
// caddy_kvroute_template_replays_total.
type templateCacheCollector struct{}

var (
	templateCacheHits = prometheus.NewDesc("caddy_kvroute_template_cache_hits_total",
		"Chat messages whose template values came from the template cache (the same JSON text converted before).", nil, nil)
	templateCacheMisses = prometheus.NewDesc("caddy_kvroute_template_cache_misses_total",
		"Chat messages converted because the template cache did not hold them.", nil, nil)
	templateCacheBytes = prometheus.NewDesc("caddy_kvroute_template_cache_bytes",
		"Bytes charged to the template cache (3 per byte of message JSON plus a fixed per-entry overhead).", nil, nil)
	templateReplays = prometheus.NewDesc("caddy_kvroute_template_replays_total",
		"Chat template loop iterations over a cached message whose recorded output was reused instead of evaluated again.", nil, nil)
)

func (templateCacheCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- templateCacheHits
	ch <- templateCacheMisses
	ch <- templateCacheBytes
	ch <- templateReplays
}

func (templateCacheCollector) Collect(ch chan<- prometheus.Metric) {
	st := currentMessageCache.Load().Stats() // nil cache: zeros
	replays, _ := jinja.MemoCounts()
	ch <- prometheus.MustNewConstMetric(templateCacheHits, prometheus.CounterValue, float64(retiredMessageHits.Load()+st.Hits))
	ch <- prometheus.MustNewConstMetric(templateCacheMisses, prometheus.CounterValue, float64(retiredMessageMisses.Load()+st.Misses))
	ch <- prometheus.MustNewConstMetric(templateCacheBytes, prometheus.GaugeValue, float64(st.Bytes))
	ch <- prometheus.MustNewConstMetric(templateReplays, prometheus.CounterValue, float64(replays))
}
