package caddymodule

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/zeebo/xxh3"

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

// setTokenizeCache gives the freshly loaded model's tokenizer the config's segment cache (before
// the model is shared).
func (a *App) setTokenizeCache(m *model.Model) {
	if a.shared.tokenize != nil {
		m.Tokenizer.SetSegmentCache(a.shared.tokenize)
	}
}

// tokenizeCacheKey is the sharedPool key of this config's segment cache of size bytes. Two configs
// share one when the tokenizer files are byte for byte the same (tokenizerFingerprint) and the
// size is unchanged: the cache maps a segment's text to the ids this binary's tokenizer gives it
// for those files, so the entries stay exact, and a reload (a changed timeout, a new worker) does
// not cost every conversation a cold tokenization. Any other change starts an empty cache; so does
// a folder whose files cannot be read (the key is then this config's own).
func (a *App) tokenizeCacheKey(size int64) string {
	fp, err := tokenizerFingerprint(a.ModelDir)
	if err != nil {
		return fmt.Sprintf("tokenize_cache size=%d config=%p", size, a)
	}
	return fmt.Sprintf("tokenize_cache size=%d tokenizer=%016x%016x", size, fp.Hi, fp.Lo)
}

// tokenizerFiles are the model folder's files a segment's ids depend on (tokenizer.json: the
// vocabulary, merges, normalizer, pre-tokenizer and added tokens; tokenizer_config.json: the
// special-token settings read with it). A missing file hashes as absent.
var tokenizerFiles = []string{"tokenizer.json", "tokenizer_config.json"}

// tokenizerFingerprint is XXH3-128 over the tokenizer files of dir, each as its name, a presence
// byte, its length (u64le) and its bytes. An error (no dir, an unreadable file) means "unknown":
// the cache is then never kept.
func tokenizerFingerprint(dir string) (xxh3.Uint128, error) {
	if dir == "" {
		return xxh3.Uint128{}, errors.New("no model folder")
	}
	h := xxh3.New()
	var n [8]byte
	for _, name := range tokenizerFiles {
		b, err := os.ReadFile(filepath.Join(dir, name))
		present := byte(1)
		if errors.Is(err, fs.ErrNotExist) {
			present, b = 0, nil
		} else if err != nil {
			return xxh3.Uint128{}, err
		}
		binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
		_, _ = h.WriteString(name)
		_, _ = h.Write([]byte{present})
		_, _ = h.Write(n[:])
		_, _ = h.Write(b)
	}
	return h.Sum128(), nil
}

// tokenizeCacheCollector exports the segment caches' counters (all of them, live and retired):
// caddy_kvroute_tokenize_cache_{hits_total,misses_total,bytes}.
type tokenizeCacheCollector struct{ counts *cacheCounts }

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

func (c tokenizeCacheCollector) Collect(ch chan<- prometheus.Metric) {
	hits, misses, bytes := c.counts.sum()
	ch <- prometheus.MustNewConstMetric(tokenizeCacheHits, prometheus.CounterValue, float64(hits))
	ch <- prometheus.MustNewConstMetric(tokenizeCacheMisses, prometheus.CounterValue, float64(misses))
	ch <- prometheus.MustNewConstMetric(tokenizeCacheBytes, prometheus.GaugeValue, float64(bytes))
}
