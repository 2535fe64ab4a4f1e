package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/kvroute/kvroute/internal/testkit/caddytest"
	"github.com/kvroute/kvroute/internal/testkit/wait"
	"github.com/kvroute/kvroute/kvevents/registry"
)

// registryStream is the JetStream stream behind the worker registry bucket.
const registryStream = "KV_" + registry.Bucket

// retryProxy is the reverse_proxy retry configuration the docs recommend (a POST retried once on
// another worker).
const retryProxy = "\t\t\tlb_retries 1\n\t\t\tlb_try_interval 250ms\n\t\t\tlb_retry_match {\n\t\t\t\tmethod POST\n\t\t\t}\n"

// registryCaddy loads the in-process Caddy connected to the whole cluster (any server may go),
// with lb_retries, before any simulator: the router creates the registry bucket.
func registryCaddy(t *testing.T, c *natsCluster) *harness {
	t.Helper()
	h := newHarness(harnessOpts{proxyOpts: retryProxy})
	h.setSite(t, caddytest.Port(t), caddytest.Port(t))
	cfg := strings.Replace(h.caddyfile(h.httpPort, h.adminPort), "embedded_nats {\n\t\t\tport random\n\t\t}", "nats_url "+c.list(0), 1)
	caddytest.MustLoad(t, cfg)
	t.Cleanup(func() { stopCaddy(t, h) })
	return h
}

// registryLeader returns the index of the server leading the registry stream.
func (c *natsCluster) registryLeader(t *testing.T) int {
	t.Helper()
	leader := -1
	wait.For(t, "registry stream leader", func() bool {
		for i, s := range c.srvs {
			if s.Running() && s.JetStreamIsStreamLeader("$G", registryStream) {
				leader = i
				return true
			}
		}
		return false
	})
	return leader
}

// loadRun sends chat requests through Caddy from two goroutines until stopped, counting the ones
// without a 200 and a chosen worker.
type loadRun struct {
	stop     chan struct{}
	wg       sync.WaitGroup
	answered atomic.Int64
	mu       sync.Mutex
	failures []string
}

func startLoad(t *testing.T, h *harness, bodies [][]byte) *loadRun {
	l := &loadRun{stop: make(chan struct{})}
	for g := range 2 {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := g; ; i += 2 {
				select {
				case <-l.stop:
					return
				default:
				}
				req, _ := http.NewRequest(http.MethodPost, h.base+"/v1/chat/completions", strings.NewReader(string(bodies[i%len(bodies)])))
				req.Header.Set("Content-Type", "application/json")
				res, err := h.client.Do(req)
				msg := ""
				if err != nil {
					msg = err.Error()
				} else {
					res.Body.Close()
					if res.StatusCode != 200 || res.Header.Get("X-Kvroute-Worker") == "" {
						msg = fmt.Sprintf("status %d worker %q fallback %q", res.StatusCode, res.Header.Get("X-Kvroute-Worker"), res.Header.Get("X-Kvroute-Fallback"))
					}
				}
				if msg != "" {
					l.mu.Lock()
					l.failures = append(l.failures, msg)
					l.mu.Unlock()
				} else {
					l.answered.Add(1)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	return l
}

func (l *loadRun) end() (int64, []string) {
	close(l.stop)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.answered.Load(), l.failures
}

// watchListed samples how many workers the running app lists until stopped; it returns the
// fewest seen.
func watchListed(t *testing.T) (stop func() int) {
	var fewest atomic.Int64
	fewest.Store(1 << 30)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			fewest.Store(min(fewest.Load(), int64(len(runningApp(t).WorkerList()))))
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	var once sync.Once
	stop = func() int {
		once.Do(func() { close(done); <-finished })
		return int(fewest.Load())
	}
	t.Cleanup(func() { stop() })
	return stop
}

// TestRegistrySurvivesNATSNodeLoss is issue 27's first fault on three in-process nats-servers:
// the router creates the registry bucket with three replicas by itself (no `nats` CLI step);
// killing the server that leads the registry stream under load fails no request and both workers
// stay listed for longer than a record's TTL. Then a second server goes: the registry loses its
// quorum and cannot be read; the router says it is degraded (metric), keeps both workers listed
// past their TTL, and routes every request; when the servers come back the simulators re-create
// their records. On the old code the router created a one-replica bucket, and the watcher dropped
// both workers 30 s after the kill (every request then failed with 503).
func TestRegistrySurvivesNATSNodeLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: runs a 3-node NATS cluster, kills two nodes under load and waits past the registry TTL, ~90 s")
	}
	c := startNATSClusterBare(t, 3)
	h := registryCaddy(t, c)
	sims := []*simWorker{
		clusterSim(t, c, 0, "r-w1", 10*time.Millisecond, false),
		clusterSim(t, c, 1, "r-w2", 10*time.Millisecond, false),
	}
	for _, w := range sims {
		h.sims[w.spec.ID], h.byEndpoint[w.ep] = w, w
		h.order = append(h.order, w)
	}
	wait.For(t, "caddy lists both workers", func() bool { return len(runningApp(t).WorkerList()) == 2 })

	nc, err := nats.Connect(c.list(2))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	info := func() *jetstream.StreamInfo {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, registryStream)
		if err != nil {
			t.Fatalf("registry stream info: %v", err)
		}
		return s.CachedInfo()
	}
	if r := info().Config.Replicas; r != 3 {
		t.Errorf("the router created the registry bucket with %d replicas, want 3 (min(3, cluster size))", r)
	}

	var bodies [][]byte
	for i := range 8 {
		bodies = append(bodies, textBody(t, "qwen", longText(fmt.Sprintf("Registry notes %d.", i), 120+10*i)))
	}
	const beyondTTL = registry.TTL + 10*time.Second // past a record's TTL and the sweep after it

	t.Run("leader lost", func(t *testing.T) {
		load := startLoad(t, h, bodies)
		listed := watchListed(t)
		wait.For(t, "requests answered", func() bool { return load.answered.Load() >= 20 })
		leader := c.registryLeader(t)
		c.srvs[leader].Shutdown()
		t.Logf("killed n%d, the registry stream's leader", leader)
		time.Sleep(beyondTTL)
		fewest := listed()
		answered, failures := load.end()
		if len(failures) != 0 || fewest != 2 {
			t.Fatalf("after losing the registry's server: %d requests answered, %d failed (%v), fewest workers listed %d (want 0 failed, 2 listed)",
				answered, len(failures), failures[:min(len(failures), 5)], fewest)
		}
		t.Logf("%d requests answered, none failed; both workers listed throughout", answered)
		c.restart(leader)
	})

	t.Run("quorum lost", func(t *testing.T) {
		load := startLoad(t, h, bodies)
		listed := watchListed(t)
		wait.For(t, "requests answered", func() bool { return load.answered.Load() >= 20 })
		// Two servers go: the three-replica registry has no quorum and cannot be read.
		down := []int{1, 2}
		for _, i := range down {
			c.srvs[i].Shutdown()
		}
		wait.For(t, "registry degraded", func() bool { return h.metric(t, "caddy_kvroute_registry_degraded") == 1 })
		time.Sleep(beyondTTL)
		if fewest := listed(); fewest != 2 {
			t.Fatalf("while the registry cannot be read the router listed %d workers at one point, want 2", fewest)
		}
		c.restartAll(down...)
		wait.For(t, "registry readable", func() bool { return h.metric(t, "caddy_kvroute_registry_degraded") == 0 })
		// the simulators' publishers re-create their records in the bucket
		wait.For(t, "records re-created", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			kv, err := js.KeyValue(ctx, registry.Bucket)
			if err != nil {
				return false
			}
			for _, w := range sims {
				e, err := kv.Get(ctx, w.spec.ID)
				if err != nil || time.Since(e.Created()) > registry.HeartbeatInterval+2*time.Second {
					return false
				}
			}
			return true
		})
		answered, failures := load.end()
		if len(failures) != 0 || len(runningApp(t).WorkerList()) != 2 {
			t.Fatalf("through the registry outage: %d answered, %d failed (%v), %d workers listed now",
				answered, len(failures), failures[:min(len(failures), 5)], len(runningApp(t).WorkerList()))
		}
		t.Logf("%d requests answered through the registry outage, none failed", answered)
	})
}

// TestRouterRaisesRegistryReplicas: a registry bucket created with one replica before the router
// (by hand, or by an older router) is raised to three on a three-server cluster when the router
// opens it, and said so; a publisher (a bridge or simulator) opening it changes nothing.
func TestRouterRaisesRegistryReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: runs a 3-node NATS cluster, ~2.5 s")
	}
	c := startNATSClusterBare(t, 3)
	nc, err := nats.Connect(c.list(0))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wait.For(t, "one-replica bucket", func() bool {
		cfg := registry.BucketConfig()
		cfg.Replicas = 1
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		defer acancel()
		_, err := js.CreateKeyValue(actx, cfg)
		return err == nil
	})
	wait.For(t, "the cluster advertised to the client", func() bool { return registry.ClusterSize(nc) == 3 })
	replicas := func() int {
		s, err := js.Stream(ctx, registryStream)
		if err != nil {
			t.Fatal(err)
		}
		return s.CachedInfo().Config.Replicas
	}
	if _, err := registry.OpenBucket(ctx, js); err != nil || replicas() != 1 {
		t.Fatalf("a publisher's open: %v, replicas %d; want the bucket unchanged (1)", err, replicas())
	}
	core, logs := observer.New(zapcore.InfoLevel)
	_, res, err := registry.OpenRouterBucket(ctx, js, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Updated || res.Want != 3 || res.Replicas != 3 || replicas() != 3 {
		t.Fatalf("router open: %+v, stream replicas %d; want raised to 3", res, replicas())
	}
	if n := logs.FilterMessage("raised NATS KV bucket replicas").Len(); n != 1 {
		t.Fatalf("raise logged %d times", n)
	}
}
