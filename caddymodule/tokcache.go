package caddymodule

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

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

// setTokenizeCache gives the freshly loaded model's tokenizer its segment cache (before the
// model is shared) and points the metrics at it. A config reload keeps the cache of the config
// it replaces when the tokenizer files are byte for byte the same and the size is unchanged: the
// cache maps a segment's text to the ids this binary's tokenizer gives it for those files, so
// the entries stay exact, and a reload (a changed timeout, a new worker) does not cost every
// conversation a cold tokenization. Any other change starts an empty cache.
func (a *App) setTokenizeCache(m *model.Model) {
	size := a.tokenizeCacheSize()
	fp, fpErr := tokenizerFingerprint(a.ModelDir)
	tokenizeCacheMu.Lock()
	defer tokenizeCacheMu.Unlock()
	if cur := currentTokenizeCache.Load(); cur != nil && fpErr == nil && currentFingerprint.ok &&
		currentFingerprint.sum == fp && currentFingerprint.size == size {
		m.Tokenizer.SetSegmentCache(cur)
		return
	}
	c := tokenizer.NewSegmentCache(size)
	m.Tokenizer.SetSegmentCache(c)
	currentFingerprint.sum, currentFingerprint.size, currentFingerprint.ok = fp, size, fpErr == nil
	if old := currentTokenizeCache.Swap(c); old != nil {
		st := old.Stats()
		retiredHits.Add(st.Hits)
		retiredMisses.Add(st.Misses)
	}
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

// currentTokenizeCache is the segment cache of the most recently loaded config, read at scrape
// time, and currentFingerprint what it was made for (guarded by tokenizeCacheMu). A reload that
// changes the tokenizer files or the size makes a new cache; the counts of the replaced cache are
// kept in retiredHits and retiredMisses so the counters do not reset (lookups the old config
// still serves during the switch-over are not counted).
var (
	currentTokenizeCache       atomic.Pointer[tokenizer.SegmentCache]
	tokenizeCacheMu            sync.Mutex // serializes swaps
	retiredHits, retiredMisses atomic.Uint64
	currentFingerprint         struct {
		sum  xxh3.Uint128
		size int64
		ok   bool
	}
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
