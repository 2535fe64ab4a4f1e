package bridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	zmq "github.com/pebbe/zmq4"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/kvroute/kvroute/internal/natsutil"
	"github.com/kvroute/kvroute/internal/testkit/natstest"
	"github.com/kvroute/kvroute/internal/testkit/wait"
	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/kvevents/bridge"
	"github.com/kvroute/kvroute/kvevents/registry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testEnv is an embedded NATS server, a bridge connection, a router connection and a ZMQ context for
// the fake engines, all stopped at the end of the test.
type testEnv struct {
	t     *testing.T
	srv   *natsutil.Embedded
	port  int
	store string
	nc    *nats.Conn // the bridge's
	rc    *nats.Conn // the router's
	zctx  *zmq.Context
}

func newEnv(t *testing.T) *testEnv {
	e := &testEnv{t: t, port: freeTCPPair(t), store: t.TempDir()}
	e.startNATS()
	var err error
	opts := &natsutil.ConnectConfig{ReconnectWait: 20 * time.Millisecond}
	if e.nc, err = natsutil.Connect(e.srv.ClientURL(), opts); err != nil {
		t.Fatal(err)
	}
	if e.rc, err = natsutil.Connect(e.srv.ClientURL(), opts); err != nil {
		t.Fatal(err)
	}
	if e.zctx, err = zmq.NewContext(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.nc.Close()
		e.rc.Close()
		e.srv.Shutdown()
		if err := e.zctx.Term(); err != nil {
			t.Errorf("terminating zmq context: %v", err)
		}
	})
	return e
}

func (e *testEnv) startNATS() {
	srv, err := natsutil.StartEmbedded(&natsutil.EmbeddedConfig{Port: e.port, StoreDir: e.store})
	if err != nil {
		e.t.Fatal(err)
	}
	e.srv = srv
}

// registryBucket opens the worker registry bucket over the router's connection.
func (e *testEnv) registryBucket() jetstream.KeyValue {
	e.t.Helper()
	return natstest.Bucket(e.t, e.rc)
}

// record returns worker id's record in the registry bucket kv; false when the bucket has none.
func record(t *testing.T, kv jetstream.KeyValue, id string) (registry.Worker, bool) {
	t.Helper()
	entry, err := kv.Get(context.Background(), id)
	if err != nil {
		return registry.Worker{}, false
	}
	rec, err := registry.Decode(id, entry.Value())
	if err != nil {
		t.Fatal(err)
	}
	return rec, true
}

// mustRecord is record for a worker that must be registered.
func mustRecord(t *testing.T, kv jetstream.KeyValue, id string) registry.Worker {
	t.Helper()
	rec, ok := record(t, kv, id)
	if !ok {
		t.Fatalf("no registry record of %s", id)
	}
	return rec
}

func (e *testEnv) startBridge(cfg *bridge.Config) *bridge.Bridge {
	e.t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = zaptest.NewLogger(e.t, zaptest.Level(zap.WarnLevel))
	}
	b, err := bridge.New(e.nc, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := b.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		if err := b.Stop(context.Background()); err != nil {
			e.t.Errorf("stopping bridge: %v", err)
		}
	})
	return b
}

func rankStats(b *bridge.Bridge, dp int) bridge.RankStats {
	for _, s := range b.Stats() {
		if s.DPRank == dp {
			return s
		}
	}
	return bridge.RankStats{}
}

func checkStats(t *testing.T, got bridge.RankStats, want map[string]uint64) {
	t.Helper()
	b, _ := json.Marshal(got)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	for k, v := range want {
		if f, _ := m[k].(float64); uint64(f) != v {
			t.Errorf("rank %d %s = %v, want %d (all: %s)", got.DPRank, k, m[k], v, b)
		}
	}
}

// sameIndex compares the index the consumer built from NATS with the directly built one, on the
// blocks either side stored.
func sameIndex(t *testing.T, direct, routed *applier) {
	t.Helper()
	if len(direct.blocks) == 0 {
		t.Fatal("nothing was stored")
	}
	sameIndexAs(t, direct, routed.idx, routed.blocks)
}

const contractJSON = `{"schema":"kvroute.video_contract/v1","adapter":"qwen3_vl","engine":"vllm"}`

// TestForwardFillAndReplay drives a two-rank vLLM worker: a dropped batch on each rank is recovered
// from the engine's replay socket (rank 0 with newer vLLM's topic frame in replies, rank 1 without),
// a batch lost between NATS and the router is recovered by a replay request answered from the ring,
// malformed ZMQ messages are counted and skipped, and the index built from the NATS subject equals
// the index built from the same events applied directly. The worker registers with the block size
// read from the engine's /metrics and deregisters on Stop.
func TestForwardFillAndReplay(t *testing.T) {
	env := newEnv(t)
	pubPort, replayPort := freeTCPPair(t), freeTCPPair(t)
	engines := []*fakeEngine{
		startEngine(t, env.zctx, tcpEP(pubPort), tcpEP(replayPort), true),
		startEngine(t, env.zctx, tcpEP(pubPort+1), tcpEP(replayPort+1), false),
	}
	metrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, `vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True"} 1.0`)
	}))
	defer metrics.Close()

	cons := newConsumer(t, env.rc, "w1", 5)
	defer cons.close()
	b := env.startBridge(&bridge.Config{
		Workers: []bridge.WorkerConfig{{
			WorkerID: "w1", Endpoint: metrics.URL, Model: "qwen3-vl-test", Engine: "vllm", EngineVersion: "0.26.1",
			DPSize: 2, Features: []string{"mm_hashes"}, Contract: json.RawMessage(contractJSON),
			ZMQEndpoint: tcpEP(pubPort), ReplayEndpoint: tcpEP(replayPort), Topic: "kv-events",
		}},
		Heartbeat: 50 * time.Millisecond,
	})
	for _, e := range engines {
		e.waitSubscribed()
	}

	direct := newApplier(t)
	gens := []*eventGen{newEventGen(1, 16), newEventGen(2, 16)}
	const n = 40
	for i := range n {
		for dp, e := range engines {
			k := index.WorkerKey{ID: "w1", DPRank: dp}
			if dp == 0 && i == 15 {
				e.sendRaw([]byte("kv-events"), seqFrame(99))                                // two frames
				e.sendRaw([]byte("kv-events"), []byte{0, 0, 0, 0, 0, 0, 1}, []byte{0x90})   // 7-byte seq
				e.sendRaw([]byte("kv-events"), seqFrame(99), []byte{0x90}, []byte("extra")) // four frames
			}
			if dp == 1 && i == 25 { // well framed, not msgpack: forwarded; the router's decoder rejects it
				junk := []byte("\xc1 not a batch")
				e.publish(junk, false)
				direct.apply(k, junk)
			}
			p := gens[dp].batch(t, i, dp)
			drop := (dp == 0 && i == 10) || (dp == 1 && i == 20)
			e.publish(p, drop)
			direct.apply(k, p)
		}
	}
	cons.waitNext(0, n)
	cons.waitNext(1, n+1)
	cons.waitReplies()
	cons.mu.Lock()
	sameIndex(t, direct, cons.ap)
	if cons.replays < 1 || len(cons.replayErrs) > 0 || len(cons.resets) > 0 || cons.badHeaders > 0 {
		t.Errorf("router side: %d replay requests (want >= 1), errors %q, resets %q, bad headers %d", cons.replays, cons.replayErrs, cons.resets, cons.badHeaders)
	}
	if len(cons.encodings) != 1 || cons.encodings["vllm"] == 0 {
		t.Errorf("Kvroute-Encoding values = %v, want only vllm", cons.encodings)
	}
	if direct.decodeErrors != 1 || cons.ap.decodeErrors != 1 {
		t.Errorf("decode errors: direct %d, routed %d; want 1 each", direct.decodeErrors, cons.ap.decodeErrors)
	}
	cons.mu.Unlock()
	checkStats(t, rankStats(b, 0), map[string]uint64{"received": n - 1, "forwarded": n, "bad_frames": 3, "gaps": 1, "filled": 1, "lost": 0, "resets": 0, "restarts": 0, "replay_errors": 0, "last_seq": n - 1})
	checkStats(t, rankStats(b, 1), map[string]uint64{"received": n, "forwarded": n + 1, "bad_frames": 0, "gaps": 1, "filled": 1, "lost": 0, "resets": 0, "restarts": 0, "last_seq": n})
	if s := rankStats(b, 0); s.ReplayRequests < 1 || s.Replayed < 1 {
		t.Errorf("rank 0 answered %d replay requests with %d batches, want >= 1", s.ReplayRequests, s.Replayed)
	}

	// Registration: the record carries the probed block size, and Stop deletes it.
	kv := env.registryBucket()
	wait.For(t, "registration", func() bool { return b.Registered("w1") })
	rec := mustRecord(t, kv, "w1")
	wantEP := strings.TrimPrefix(metrics.URL, "http://")
	if rec.Endpoint != wantEP || rec.BlockSize != 16 || rec.DPSize != 2 || rec.Model != "qwen3-vl-test" || rec.Engine != "vllm" ||
		rec.EngineVersion != "0.26.1" || !rec.HasFeature("mm_hashes") || string(rec.Contract) != contractJSON {
		t.Errorf("record = %+v", rec)
	}
	if err := b.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(context.Background(), "w1"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("record after Stop: err = %v, want ErrKeyNotFound", err)
	}
}

// settleGoroutines waits until the goroutine count is back to at most n.
func settleGoroutines(t *testing.T, n int) {
	t.Helper()
	if dbgGoroutines {
		time.Sleep(2 * time.Second)
		if runtime.NumGoroutine() > n {
			_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
		}
	}
	wait.For(t, fmt.Sprintf("goroutines back to %d", n), func() bool { return runtime.NumGoroutine() <= n })
}

var dbgGoroutines = os.Getenv("DBG_G") != ""
