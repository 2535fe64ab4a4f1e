package integration

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/kvroute/kvroute/internal/natsutil"
	"github.com/kvroute/kvroute/internal/sim"
	"github.com/kvroute/kvroute/internal/testkit"
	"github.com/kvroute/kvroute/internal/testkit/caddytest"
	"github.com/kvroute/kvroute/internal/testkit/wait"
)

// planNATSCluster chooses the addresses of an n-server cluster and starts nothing: c.restartAll
// starts it.
func planNATSCluster(t *testing.T, n int) *natsCluster {
	t.Helper()
	c := &natsCluster{t: t, srvs: make([]*server.Server, n)}
	clusterPorts := make([]int, n)
	for i := range clusterPorts {
		clusterPorts[i] = caddytest.Port(t)
	}
	for i := range n {
		var routes []*url.URL
		for j, p := range clusterPorts {
			if j != i {
				routes = append(routes, &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", p)})
			}
		}
		port := caddytest.Port(t)
		c.opts = append(c.opts, &server.Options{
			ServerName: fmt.Sprintf("n%d", i), Host: "127.0.0.1", Port: port,
			JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
			Cluster: server.ClusterOpts{Name: "kvroute", Host: "127.0.0.1", Port: clusterPorts[i]},
			Routes:  routes,
		})
		c.urls = append(c.urls, fmt.Sprintf("nats://127.0.0.1:%d", port))
	}
	t.Cleanup(func() {
		for _, s := range c.srvs {
			if s != nil {
				s.Shutdown()
			}
		}
	})
	return c
}

// TestCaddyBeforeNATS is issue 27's second fault: Caddy started before its NATS cluster. The
// config loads at once (the old code failed it: "looking up bucket kvroute_workers: context
// deadline exceeded"), requests route on load over the static worker (index_unavailable), a
// reload works; once the cluster is up the router connects, creates the registry, receives the
// simulator's KV events (the simulator too connected and registered in the background), and routes
// exactly: the predicted overlap equals the simulator's hit.
func TestCaddyBeforeNATS(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: starts Caddy before a 3-node NATS cluster and waits for it to connect and route exactly, ~9 s")
	}
	c := planNATSCluster(t, 3)
	m, lm := testkit.Models(t, modelDir)
	const id = "late-w1"
	fe, err := sim.NewFrontend(&sim.FrontendConfig{ModelDir: modelDir, Model: m, LayoutModel: lm, Media: newSimResolver(t), Contract: []byte(sim.HubContract)})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := natsutil.Connect(c.list(1), &natsutil.ConnectConfig{Name: "kvroute-sim " + id, ReconnectWait: 50 * time.Millisecond, Background: true})
	if err != nil {
		t.Fatalf("simulator connect before NATS: %v", err)
	}
	t.Cleanup(nc.Close)
	pub, err := sim.NewPublisher(&sim.PublisherConfig{WorkerID: id, Conn: nc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	bc, err := sim.NewBlockCache(&sim.BlockCacheConfig{BlockSize: blockSize, Capacity: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	w := &simWorker{spec: simSpec{ID: id, Model: "qwen"}, pub: pub}
	w.srv = sim.New(&sim.Config{WorkerID: id, Model: "qwen", BlockSize: blockSize, Frontend: fe, Blocks: bc, Events: pub})
	w.ts = httptest.NewServer(http.HandlerFunc(w.serveHTTP))
	t.Cleanup(w.ts.Close)
	w.ep = w.ts.Listener.Addr().String()
	// as kvroute-sim does: claim the id (waiting for NATS), then register
	registered := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		if err := sim.ClaimWorkerIDWait(ctx, nc, id, nil); err != nil {
			registered <- err
			return
		}
		reg, err := sim.RegisterConn(ctx, nc, w.ep, w.srv, nil)
		if err == nil {
			t.Cleanup(func() {
				sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
				defer c()
				_ = reg.Close(sctx)
			})
		}
		registered <- err
	}()

	h := newHarness(harnessOpts{appOpts: fmt.Sprintf("\t\tworker %s {\n\t\t\tendpoint %s\n\t\t\tmodel qwen\n\t\t\tengine vllm\n\t\t\tblock_size %d\n\t\t}\n", id, w.ep, blockSize)})
	h.sims[id], h.byEndpoint[w.ep], h.order = w, w, []*simWorker{w}
	h.setSite(t, caddytest.Port(t), caddytest.Port(t))
	cfg := strings.Replace(h.caddyfile(h.httpPort, h.adminPort), "embedded_nats {\n\t\t\tport random\n\t\t}", "nats_url "+c.list(0), 1)
	start := time.Now()
	caddytest.MustLoad(t, cfg) // the old code: "starting kvroute NATS: looking up bucket kvroute_workers: ..."
	t.Cleanup(func() { stopCaddy(t, h) })
	t.Logf("config loaded in %s with no NATS server up", time.Since(start).Round(time.Millisecond))

	body := textBody(t, "qwen", longText("Before NATS.", 160))
	for i := range 2 {
		a := h.chat(t, body)
		if a.status != 200 || a.worker != id || a.fallback != "index_unavailable" {
			t.Fatalf("request %d without NATS: status %d worker %q fallback %q; want 200 from the static worker, index_unavailable", i, a.status, a.worker, a.fallback)
		}
	}
	// a reload while NATS is down keeps serving
	caddytest.MustLoad(t, strings.Replace(cfg, "allow_loopback", "allow_loopback\n\t\t\tdecode_slots 3", 1))
	h.client.CloseIdleConnections()
	if a := h.chat(t, body); a.status != 200 || a.fallback != "index_unavailable" {
		t.Fatalf("after a reload without NATS: status %d fallback %q", a.status, a.fallback)
	}
	if n := h.metric(t, "caddy_kvroute_registry_degraded"); n != 1 {
		t.Fatalf("registry_degraded %v before NATS is up, want 1", n)
	}

	c.restartAll(0, 1, 2)
	if err := <-registered; err != nil {
		t.Fatalf("simulator registering once NATS is up: %v", err)
	}
	wait.For(t, "router connected, registry open", func() bool {
		return h.metric(t, "caddy_kvroute_nats_connected") == 1 && h.metric(t, "caddy_kvroute_registry_degraded") == 0
	})
	wait.For(t, "simulator connected", pub.Connected)
	// The simulator's first events (its reset, sent when its connection came up) may reach the
	// cluster before the router's subscription does, and are then not delivered to it (NATS core
	// subjects keep nothing): the flake seen in two full runs. A probe request every 500 ms makes
	// the simulator publish again until the router has seen one of its events.
	probes, lastProbe := 0, time.Time{}
	wait.For(t, "event subscription live", func() bool {
		if ws, ok := h.workers(t)[id]; ok && ws.LastSeq != nil {
			return true
		}
		if time.Since(lastProbe) >= 500*time.Millisecond {
			probes++
			lastProbe = time.Now()
			h.chat(t, textBody(t, "qwen", longText(fmt.Sprintf("Probe %d.", probes), 40)))
		}
		return false
	})
	t.Logf("event subscription live after %d probe requests", probes)

	fresh := textBody(t, "qwen", longText("After NATS is up.", 200))
	if a := h.chat(t, fresh); a.status != 200 || a.fallback != "" {
		t.Fatalf("first request with NATS up: status %d fallback %q, want exact routing", a.status, a.fallback)
	}
	h.waitSeq(t, id, pub.Next()-1)
	a := h.chat(t, fresh)
	if a.status != 200 || a.fallback != "" || a.overlap == 0 || a.overlap != a.hitBlocks {
		t.Fatalf("repeat with NATS up: status %d fallback %q predicted %d blocks, simulator hit %d", a.status, a.fallback, a.overlap, a.hitBlocks)
	}
	t.Logf("with NATS up: predicted %d of %d blocks, simulator hit %d", a.overlap, a.total, a.hitBlocks)
}
