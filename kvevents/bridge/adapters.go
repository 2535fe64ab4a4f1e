package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/kvroute/kvroute/kvevents/registry"
)

// LoRA adapters in the worker record (DESIGN.md §1.1, §2.1): the bridge reads them from the
// engine's OpenAI model list, where vLLM lists each adapter as a model card whose `parent` is the
// base model (vllm/entrypoints/openai/serving_models.py show_available_models: base models have
// parent null, LoRA cards root = lora_path, parent = the base model name), and refreshes them,
// since vLLM loads and unloads adapters at run time (/v1/load_lora_adapter, LoRA resolvers).

// maxModelsBytes bounds the /v1/models page read by ProbeAdapters.
const maxModelsBytes = 4 << 20

// DefaultAdaptersRefresh is how often the bridge reads the engine's adapters again by default.
const DefaultAdaptersRefresh = 15 * time.Second

// ProbeAdapters returns the LoRA adapters listed at url (an OpenAI /v1/models page): every model
// card with a non-empty `parent`, as {name: id, base_model: parent}. Cards whose names are not
// valid adapter names (registry.ValidAdapterName) are left out; beyond registry.MaxAdapters the
// rest are left out (truncated reports how many). The page is read up to 4 MiB.
//
// apiKey, when not empty, is sent as `Authorization: Bearer <apiKey>` (vLLM started with --api-key
// protects /v1/models).
func ProbeAdapters(ctx context.Context, client *http.Client, url, apiKey string) (as []registry.Adapter, truncated int, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("reading adapters: %w", err)
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("reading adapters: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("reading adapters: GET %s: status %d", url, resp.StatusCode)
	}
	var page struct {
		Data []struct {
			ID     string  `json:"id"`
			Parent *string `json:"parent"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxModelsBytes)).Decode(&page); err != nil {
		return nil, 0, fmt.Errorf("reading adapters: decoding %s: %w", url, err)
	}
	for _, c := range page.Data {
		if c.Parent == nil || *c.Parent == "" || !registry.ValidAdapterName(c.ID) || !registry.ValidAdapterName(*c.Parent) {
			continue
		}
		if len(as) == registry.MaxAdapters {
			truncated++
			continue
		}
		as = append(as, registry.Adapter{Name: c.ID, BaseModel: *c.Parent})
	}
	slices.SortStableFunc(as, func(a, b registry.Adapter) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	// one name listed twice keeps its first card (the record refuses two base models for one name)
	as = slices.CompactFunc(as, func(a, b registry.Adapter) bool { return a.Name == b.Name })
	return as, truncated, nil
}

// liveRecord is the record a bridge publishes for one worker: its block size and adapters change
// while it runs. Safe for concurrent use.
type liveRecord struct {
	mu       sync.Mutex
	w        WorkerConfig
	bs       int
	adapters []registry.Adapter
}

func (r *liveRecord) record() registry.Worker {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.w.Record(r.bs)
	rec.Adapters = slices.Clone(r.adapters)
	return rec
}

// setBlockSize changes the block size and returns the new record.
func (r *liveRecord) setBlockSize(n int) registry.Worker {
	r.mu.Lock()
	r.bs = n
	r.mu.Unlock()
	return r.record()
}

// setAdapters changes the adapters; changed is false when they are the same.
func (r *liveRecord) setAdapters(as []registry.Adapter) (rec registry.Worker, changed bool) {
	r.mu.Lock()
	changed = !slices.Equal(r.adapters, as)
	r.adapters = as
	r.mu.Unlock()
	return r.record(), changed
}

// probeAdapters reads the worker's adapters once (nil, logged, when the engine does not answer).
func (b *Bridge) probeAdapters(ctx context.Context, log *zap.Logger, client *http.Client, w WorkerConfig) ([]registry.Adapter, bool) {
	key, err := w.engineAPIKey()
	if err != nil {
		log.Warn("reading the engine's API key", zap.Error(err))
		return nil, false
	}
	as, truncated, err := ProbeAdapters(ctx, client, w.ModelsURL, key)
	if err != nil {
		log.Debug("reading the engine's LoRA adapters", zap.String("models_url", w.ModelsURL), zap.Error(err))
		return nil, false
	}
	if truncated > 0 {
		log.Warn("the engine lists more LoRA adapters than a worker record holds; the rest are not routed to this worker",
			zap.Int("listed", registry.MaxAdapters), zap.Int("left_out", truncated))
	}
	return as, true
}

// refreshAdapters reads the worker's adapters every AdaptersRefresh and re-publishes the record
// when they changed, until ctx is done. A failed read keeps the last known adapters (an engine
// that does not answer is the health checks' business, not a reason to drop its adapters).
func (b *Bridge) refreshAdapters(ctx context.Context, log *zap.Logger, client *http.Client, p *registry.Publisher, w WorkerConfig, lr *liveRecord) {
	t := time.NewTicker(b.cfg.AdaptersRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		as, ok := b.probeAdapters(ctx, log, client, w)
		if !ok {
			continue
		}
		rec, changed := lr.setAdapters(as)
		if !changed {
			continue
		}
		if err := p.Update(ctx, rec); err != nil {
			log.Error("re-registering worker with its LoRA adapters", zap.Error(err))
			continue
		}
		names := make([]string, len(as))
		for i, a := range as {
			names[i] = a.Name
		}
		log.Info("LoRA adapters changed; re-registered", zap.Strings("adapters", names))
	}
}

// maxAPIKeyBytes bounds an engine API key file.
const maxAPIKeyBytes = 4 << 10

// engineAPIKey reads w.EngineAPIKeyFile (at every probe, so a rotated key is picked up): its
// content without surrounding white space; "" when no file is configured.
func (w *WorkerConfig) engineAPIKey() (string, error) {
	if w.EngineAPIKeyFile == "" {
		return "", nil
	}
	f, err := os.Open(w.EngineAPIKeyFile)
	if err != nil {
		return "", fmt.Errorf("reading engine API key: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxAPIKeyBytes+1))
	if err != nil {
		return "", fmt.Errorf("reading engine API key: %w", err)
	}
	if len(b) > maxAPIKeyBytes {
		return "", fmt.Errorf("reading engine API key: %s is larger than %d bytes", w.EngineAPIKeyFile, maxAPIKeyBytes)
	}
	return strings.TrimSpace(string(b)), nil
}
