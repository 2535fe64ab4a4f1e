package caddymodule

import (
	"fmt"

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

// setMessageCache gives the freshly loaded model's chat template the config's message cache
// (before the model is shared; none for a model folder without a chat template: completions
// only).
func (a *App) setMessageCache(m *model.Model) {
	if m.Template != nil && a.shared.message != nil {
		m.Template.SetMessageCache(a.shared.message)
	}
}

// messageCacheKey is the sharedPool key of a message cache of size bytes. Two configs share one
// when the size is the same: an entry is a message's JSON text converted to template values,
// which depends on no file (the content format, the one template property it depends on, is part
// of its key), and the iterations a replaced template recorded are never replayed by another
// template (they are keyed by its loop nodes).
func messageCacheKey(size int64) string { return fmt.Sprintf("message_cache size=%d", size) }

// templateCacheCollector exports the message caches' counters (all of them, live and retired) and the template engine's
// replays: caddy_kvroute_template_cache_{hits_total,misses_total,bytes} and
// caddy_kvroute_template_replays_total.
type templateCacheCollector struct{ counts *cacheCounts }

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

func (c templateCacheCollector) Collect(ch chan<- prometheus.Metric) {
	hits, misses, bytes := c.counts.sum()
	replays, _ := jinja.MemoCounts()
	ch <- prometheus.MustNewConstMetric(templateCacheHits, prometheus.CounterValue, float64(hits))
	ch <- prometheus.MustNewConstMetric(templateCacheMisses, prometheus.CounterValue, float64(misses))
	ch <- prometheus.MustNewConstMetric(templateCacheBytes, prometheus.GaugeValue, float64(bytes))
	ch <- prometheus.MustNewConstMetric(templateReplays, prometheus.CounterValue, float64(replays))
}
