package bridge_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/kvroute/kvroute/kv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kvroute/kvroute/internal/testkit/wait"
	"github.com/kvroute/kvroute/kvevents/bridge"
	"github.com/kvroute/kvroute/kvevents/codec"
)

// hybridBatch is a hybrid vLLM batch with the group order reversed: a Mamba group 0, listed first,
// whose store is dense at its own block size mambaBS (one hash for 2·bs tokens, so only its kind
// keeps it out), then the full-attention group 1 with two blocks of bs tokens.
func hybridBatch(t *testing.T, bs, mambaBS int) []byte {
	t.Helper()
	toks := make([]uint32, 2*bs)
	for i := range toks {
		toks[i] = uint32(1000 + i%5000)
	}
	mamba := codec.Event{Type: codec.BlockStored, BlockHashes: []kv.EngineHash{22}, TokenIDs: toks, BlockSize: mambaBS,
		Medium: "GPU", HasMedium: true, GroupIdx: 0, HasGroupIdx: true, SpecKind: "mamba", HasSpecKind: true}
	full := codec.Event{Type: codec.BlockStored, BlockHashes: []kv.EngineHash{21, 22}, TokenIDs: toks, BlockSize: bs,
		Medium: "GPU", HasMedium: true, GroupIdx: 1, HasGroupIdx: true, SpecKind: "full_attention", HasSpecKind: true}
	raw, err := codec.EncodeVLLM(&codec.Batch{TS: 1.5, Events: []codec.Event{mamba, full}, HasDPRank: true}, codec.ArrayForm, codec.MapForm)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func recordBlockSize(t *testing.T, kv jetstream.KeyValue, id string) int {
	t.Helper()
	rec, _ := record(t, kv, id)
	return rec.BlockSize
}

// TestHybridBlockSizeFromEvents: a hybrid worker whose metrics page names block size 16 (not the
// attention group's) is registered with 16 first and then re-registered with the block size of its
// full-attention group's events (1056), not the Mamba group's (2112, listed first); a worker whose
// metrics page never answers registers from its events alone (2096); a configured block size is kept.
func TestHybridBlockSizeFromEvents(t *testing.T) {
	env := newEnv(t)
	metrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			fmt.Fprintln(w, `vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True"} 1.0`)
			return
		}
		http.NotFound(w, r) // /none/metrics: no block size
	}))
	defer metrics.Close()
	ports := []int{freeTCPPair(t), freeTCPPair(t), freeTCPPair(t)}
	engines := make([]*fakeEngine, len(ports))
	for i, p := range ports {
		engines[i] = startEngine(t, env.zctx, tcpEP(p), "", false)
	}
	b := env.startBridge(&bridge.Config{
		Workers: []bridge.WorkerConfig{
			{WorkerID: "metrics16", Endpoint: metrics.URL, Model: "qwen3.5", Engine: "vllm", ZMQEndpoint: tcpEP(ports[0])},
			{WorkerID: "nometrics", Endpoint: metrics.URL, MetricsURL: metrics.URL + "/none/metrics", Model: "qwen3.5", Engine: "vllm", ZMQEndpoint: tcpEP(ports[1])},
			{WorkerID: "configured", Endpoint: metrics.URL, Model: "qwen3.5", Engine: "vllm", BlockSize: 528, ZMQEndpoint: tcpEP(ports[2])},
		},
		Heartbeat:     50 * time.Millisecond,
		RegisterRetry: 20 * time.Millisecond,
	})
	for _, e := range engines {
		e.waitSubscribed()
	}
	kv := env.registryBucket()
	wait.For(t, "metrics16 registered with the metrics' 16", func() bool { return recordBlockSize(t, kv, "metrics16") == 16 })
	wait.For(t, "configured registered", func() bool { return recordBlockSize(t, kv, "configured") == 528 })
	if b.Registered("nometrics") {
		t.Fatal("nometrics registered before any block size was known")
	}
	engines[0].publish(hybridBatch(t, 1056, 2112), false)
	engines[1].publish(hybridBatch(t, 2096, 4192), false)
	engines[2].publish(hybridBatch(t, 1056, 2112), false)
	wait.For(t, "metrics16 re-registered with 1056", func() bool { return recordBlockSize(t, kv, "metrics16") == 1056 })
	wait.For(t, "nometrics registered with 2096", func() bool { return recordBlockSize(t, kv, "nometrics") == 2096 })
	time.Sleep(100 * time.Millisecond) // two heartbeats: the configured record stays
	if n := recordBlockSize(t, kv, "configured"); n != 528 {
		t.Errorf("configured worker's record block size %d, want 528", n)
	}
}
