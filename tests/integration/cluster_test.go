package integration

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kvroute/kvroute/internal/natsutil"
	"github.com/kvroute/kvroute/internal/sim"
	"github.com/kvroute/kvroute/internal/testkit"
	"github.com/kvroute/kvroute/internal/testkit/caddytest"
	"github.com/kvroute/kvroute/internal/testkit/indextest"
	"github.com/kvroute/kvroute/internal/testkit/wait"
	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/kvevents/registry"
	"github.com/kvroute/kvroute/kvevents/subscriber"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/routing/loadsync"
	"github.com/kvroute/kvroute/routing/router"
	"github.com/kvroute/kvroute/routing/scheduler"
)

// natsCluster is three nats-server instances in one process with real routes between them
// (loopback, kernel-chosen ports) and JetStream clustered.
type natsCluster struct {
	t    *testing.T
	srvs []*server.Server
	opts []*server.Options
	urls []string
}

func startNATSCluster(t *testing.T, n int) *natsCluster {
	t.Helper()
	c := startNATSClusterBare(t, n)
	// The worker registry replicated on every server, so it survives the loss of one (the docs tell
	// operators to create it so at scale).
	nc, err := nats.Connect(c.urls[0])
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	wait.For(t, "replicated registry bucket", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: registry.Bucket, History: 1, TTL: registry.TTL,
			Storage: jetstream.FileStorage, Replicas: 3})
		return err == nil
	})
	return c
}

// startNATSClusterBare starts the n servers with routes up and no bucket.
func startNATSClusterBare(t *testing.T, n int) *natsCluster {
	t.Helper()
	clusterPorts := make([]int, n)
	for i := range clusterPorts {
		clusterPorts[i] = caddytest.Port(t)
	}
	c := &natsCluster{t: t}
	for i := range n {
		var routes []*url.URL
		for j, p := range clusterPorts {
			if j != i {
				routes = append(routes, &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", p)})
			}
		}
		opts := &server.Options{
			ServerName: fmt.Sprintf("n%d", i), Host: "127.0.0.1", Port: server.RANDOM_PORT,
			JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
			Cluster: server.ClusterOpts{Name: "kvroute", Host: "127.0.0.1", Port: clusterPorts[i]},
			Routes:  routes,
		}
		s, err := server.NewServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		go s.Start()
		if !s.ReadyForConnections(10 * time.Second) {
			t.Fatalf("nats server %d not ready", i)
		}
		opts.Port = s.Addr().(*net.TCPAddr).Port // a restart keeps the address clients know
		c.srvs = append(c.srvs, s)
		c.opts = append(c.opts, opts)
		c.urls = append(c.urls, s.ClientURL())
	}
	t.Cleanup(func() {
		for _, s := range c.srvs {
			s.Shutdown()
		}
	})
	c.waitRoutes()
	return c
}

func (c *natsCluster) waitRoutes() {
	c.t.Helper()
	wait.For(c.t, "cluster routes", func() bool {
		for _, s := range c.srvs {
			if s.NumRoutes() < len(c.srvs)-1 {
				return false
			}
		}
		return true
	})
}

// waitInterest waits until the cluster carries interest both ways between worker id's server
// (index workerSrv) and the replicas' servers: the worker's server holds the replicas'
// subscriptions to its events (one local or route subscription per replica server), and each
// replica's server holds the worker's replay and snapshot subscriptions. replicaServers names the
// replicas' servers now; it is asked again at every poll, since a replica may still be failing
// over ("" while it is disconnected, which never satisfies the wait).
func (c *natsCluster) waitInterest(t *testing.T, id string, workerSrv int, replicaServers func() []string) {
	t.Helper()
	var state string // what the last poll saw, for the failure message
	ready := func() bool {
		names := replicaServers()
		distinct := map[string]bool{}
		for _, n := range names {
			distinct[n] = true
		}
		events := c.srvs[workerSrv].GlobalAccount().Interest(wire.EventsSubject(id))
		state = fmt.Sprintf("replica servers %q, %s's interest in the events %d", names, c.srvs[workerSrv].Name(), events)
		if distinct[""] || events < len(distinct) {
			return false
		}
		seen := 0
		for _, s := range c.srvs {
			if !distinct[s.Name()] {
				continue
			}
			seen++
			acc := s.GlobalAccount()
			replay, snap := acc.Interest(wire.ReplaySubject(id)), acc.Interest(wire.SnapshotSubject(id))
			state += fmt.Sprintf(", %s's interest in replay %d snapshot %d", s.Name(), replay, snap)
			if replay == 0 || snap == 0 {
				return false
			}
		}
		return seen == len(distinct)
	}
	for deadline := time.Now().Add(30 * time.Second); !ready(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for interest in %s across the cluster: %s; routes: %s", id, state, c.routes())
		}
	}
}

// routes names, per server, the servers its route connections lead to (a diagnostic).
func (c *natsCluster) routes() string {
	var out []string
	for _, s := range c.srvs {
		rz, err := s.Routez(nil)
		if err != nil {
			out = append(out, s.Name()+": "+err.Error())
			continue
		}
		var peers []string
		for _, r := range rz.Routes {
			peers = append(peers, r.RemoteName)
		}
		out = append(out, fmt.Sprintf("%s → %v (interest in kvroute.events.c-w2 %d, in kvroute.events.c-w1 %d, subscriptions %d)", s.Name(), peers,
			s.GlobalAccount().Interest(wire.EventsSubject("c-w2")), s.GlobalAccount().Interest(wire.EventsSubject("c-w1")), s.NumSubscriptions()))
	}
	return strings.Join(out, "; ")
}

// restart starts server i again on its address and store after a Shutdown.
func (c *natsCluster) restart(i int) {
	c.t.Helper()
	c.restartAll(i)
}

// restartAll starts the servers idx again (on their addresses and stores), then waits for the
// routes between all servers.
func (c *natsCluster) restartAll(idx ...int) {
	c.t.Helper()
	for _, i := range idx {
		opts := *c.opts[i]
		s, err := server.NewServer(&opts)
		if err != nil {
			c.t.Fatal(err)
		}
		go s.Start()
		if !s.ReadyForConnections(10 * time.Second) {
			c.t.Fatalf("nats server %d not ready after restart", i)
		}
		c.srvs[i] = s
	}
	c.waitRoutes()
}

// list is every server's URL, the first one first: a client connects to it and fails over to the others.
func (c *natsCluster) list(first int) string {
	urls := []string{c.urls[first]}
	for i, u := range c.urls {
		if i != first {
			urls = append(urls, u)
		}
	}
	return strings.Join(urls, ",")
}

// clusterSim starts one simulated worker whose events and registry record go to NATS server srv
// of the cluster; its replay ring holds 10 batches.
//
// A pinned simulator knows only server srv and does not buffer publishes while disconnected: its
// batches published while that server is down are lost for every replica (as a bridge's are when its
// NATS server goes and its client buffer overflows).
func clusterSim(t *testing.T, c *natsCluster, srv int, id string, prefill time.Duration, pinned bool) *simWorker {
	t.Helper()
	m, lm := testkit.Models(t, modelDir)
	fe, err := sim.NewFrontend(&sim.FrontendConfig{ModelDir: modelDir, Model: m, LayoutModel: lm, Media: newSimResolver(t), Contract: []byte(sim.HubContract)})
	if err != nil {
		t.Fatal(err)
	}
	// Server srv's URL alone (nats.go shuffles a list): its replay and snapshot subscriptions are
	// then where the test expects them (see startCore on interest after a failover).
	url, cc := c.urls[srv], &natsutil.ConnectConfig{Name: "kvroute-sim " + id, ReconnectWait: 50 * time.Millisecond}
	if pinned {
		cc.Options = []nats.Option{nats.IgnoreDiscoveredServers(), nats.ReconnectBufSize(-1)}
	}
	nc, err := natsutil.Connect(url, cc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	pub, err := sim.NewPublisher(&sim.PublisherConfig{WorkerID: id, Conn: nc, RingBatches: 10, MaxBlocks: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	bc, err := sim.NewBlockCache(&sim.BlockCacheConfig{BlockSize: blockSize, Capacity: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	w := &simWorker{spec: simSpec{ID: id, Model: "qwen", PrefillDelay: prefill}, pub: pub}
	w.srv = sim.New(&sim.Config{WorkerID: id, Model: "qwen", BlockSize: blockSize, PrefillDelay: prefill, Frontend: fe, Blocks: bc, Events: pub})
	w.ts = httptest.NewServer(http.HandlerFunc(w.serveHTTP))
	t.Cleanup(w.ts.Close)
	w.ep = w.ts.Listener.Addr().String()
	reg, err := registerSim(nc, w)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = reg.Close(ctx)
	})
	return w
}

// coreReplica is a router replica without Caddy (Caddy keeps one running config per process, so a
// second in-process Caddy is impossible): the kvroute core the app runs (subscriber, index, router,
// load sync), connected to its own NATS server.
type coreReplica struct {
	nc     *nats.Conn
	ix     *index.Index
	sub    *subscriber.Subscriber
	rt     *router.Router
	sched  *scheduler.Scheduler
	sync   *loadsync.Sync
	ws     []router.Worker
	recs   []registry.Worker
	worker []string
}

func startCore(t *testing.T, c *natsCluster, srv int, sims []*simWorker) *coreReplica {
	t.Helper()
	m, lm := testkit.Models(t, modelDir)
	r := &coreReplica{}
	var err error
	// The servers in list order, not shuffled: the core replica fails over from server srv to the
	// next one in the list (server 0 for srv 1, the Caddy replica's server). On a core replica that
	// had failed over to server 2 instead, its resubscription at server 2 sometimes never reached
	// servers 0 and 1 (nats-server v2.15.2; 30 s with every route up: server 2 held the
	// subscription, the others did not), so the worker's batches published at server 1 never
	// reached it. That is nats-server's route interest, not kvroute; operations.md says what an
	// operator sees (KvrouteEventLag) and does.
	if r.nc, err = natsutil.Connect(c.list(srv), &natsutil.ConnectConfig{Name: "core replica", ReconnectWait: 50 * time.Millisecond,
		Options: []nats.Option{nats.DontRandomize()}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.nc.Close)
	if r.ix, err = index.New(nil); err != nil {
		t.Fatal(err)
	}
	if r.sub, err = subscriber.New(nil, r.nc, r.ix); err != nil {
		t.Fatal(err)
	}
	for _, w := range sims {
		rec := w.srv.Record(w.ep)
		r.recs = append(r.recs, rec)
		r.worker = append(r.worker, rec.WorkerID)
		r.ws = append(r.ws, router.Worker{ID: rec.WorkerID, Endpoint: rec.Endpoint, Model: rec.Model, Engine: rec.Engine,
			BlockSize: rec.BlockSize, DPSize: rec.DPSize, Features: rec.Features, Contract: rec.Contract})
	}
	r.sub.SetWorkers(r.recs)
	if err := r.sub.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.sub.Stop)
	if r.sched, err = scheduler.NewWithTracker(nil, nil, scheduler.NewTracker()); err != nil {
		t.Fatal(err)
	}
	if r.rt, err = router.New(router.DefaultConfig(), m, lm, r.ix, r.sched, nil, router.Hooks{}, nil); err != nil {
		t.Fatal(err)
	}
	if r.sync, err = loadsync.New(loadsync.Config{Replica: "core"}, r.nc, r.sched.Tracker(), func() []string { return r.worker }); err != nil {
		t.Fatal(err)
	}
	if err := r.sync.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.sync.Stop)
	return r
}

// overlaps returns each worker's overlap for body.
func (r *coreReplica) overlaps(t *testing.T, body []byte) map[string]int {
	t.Helper()
	res, err := r.rt.Route(context.Background(), &router.Input{Path: "/v1/chat/completions", Body: body, Workers: r.ws})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, c := range res.Ranked {
		out[c.WorkerID] = c.OverlapBlocks
	}
	return out
}

func (r *coreReplica) waitSeq(t *testing.T, id string, seq uint64) {
	t.Helper()
	wait.For(t, fmt.Sprintf("core replica: %s at seq %d", id, seq), func() bool {
		ws, ok := r.sub.Worker(id)
		return ok && ws.LastSeq != nil && *ws.LastSeq == seq && ws.Ranks[0].State == subscriber.StateLive
	})
}

// clusterCaddy loads the in-process Caddy replica connected to NATS server srv (which the tests
// never stop), and returns a harness for its site and admin endpoint.
func clusterCaddy(t *testing.T, c *natsCluster, srv int, sims []*simWorker) *harness {
	t.Helper()
	h := newHarness()
	for _, w := range sims {
		h.sims[w.spec.ID], h.byEndpoint[w.ep] = w, w
		h.order = append(h.order, w)
	}
	httpPort, adminPort := caddytest.Port(t), caddytest.Port(t)
	h.setSite(t, httpPort, adminPort)
	// Server srv's URL alone: nats.go shuffles a list, and a replica that had connected to the
	// server the test restarts failed over and sometimes lost its interest (see startCore).
	cfg := strings.Replace(h.caddyfile(httpPort, adminPort), "embedded_nats {\n\t\t\tport random\n\t\t}", "nats_url "+c.urls[srv], 1)
	caddytest.MustLoad(t, cfg)
	wait.For(t, "caddy replica lists the workers", func() bool { return len(runningApp(t).WorkerList()) == len(sims) })
	return h
}

func stopCaddy(t *testing.T, h *harness) {
	t.Helper()
	h.client.CloseIdleConnections()
	caddytest.Stop(t)
}

// sameIndexes checks that the Caddy replica's and the core replica's index hold the same entries
// for every worker, block for block, and that they are not empty.
func sameIndexes(t *testing.T, caddyIx *index.Index, core *coreReplica) {
	t.Helper()
	for _, id := range core.worker {
		k := index.WorkerKey{ID: id}
		if len(indextest.SortedDump(caddyIx, k)) == 0 {
			t.Fatalf("worker %s: the caddy replica holds no entries", id)
		}
		if !indextest.SameWorker(t, caddyIx, k, core.ix, k) {
			t.FailNow()
		}
	}
}

// sameOverlaps checks that both replicas give every warm request the same overlap per worker, and a
// positive one on some worker.
func sameOverlaps(t *testing.T, h *harness, core *coreReplica, bodies [][]byte) {
	t.Helper()
	for i, body := range bodies {
		e := h.explain(t, body)
		got := map[string]int{}
		for _, c := range e.Candidates {
			got[c.WorkerID] = c.OverlapBlocks
		}
		want := core.overlaps(t, body)
		best := 0
		for _, n := range want {
			best = max(best, n)
		}
		if best == 0 || !mapsEqualInt(got, want) {
			t.Fatalf("warm request %d: caddy replica overlaps %v, core replica %v", i, got, want)
		}
	}
}

func mapsEqualInt(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// waitBoth waits until both replicas applied every batch each simulator published.
func waitBoth(t *testing.T, h *harness, core *coreReplica, sims []*simWorker) {
	t.Helper()
	for _, w := range sims {
		last := w.pub.Next() - 1
		core.waitSeq(t, w.spec.ID, last)
		var ws workerStatus
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if ws = h.workers(t)[w.spec.ID]; ws.LastSeq != nil && *ws.LastSeq == last {
				break
			}
			if time.Now().After(deadline) {
				// what the Caddy replica did with the worker's events, for the failure's reader
				var results []string
				for _, line := range strings.Split(h.scrape(t), "\n") {
					if strings.HasPrefix(line, "caddy_kvroute_events_total{") && strings.Contains(line, `worker="`+w.spec.ID+`"`) {
						results = append(results, line[strings.Index(line, "result="):])
					}
				}
				seq := "null"
				if ws.LastSeq != nil {
					seq = fmt.Sprint(*ws.LastSeq)
				}
				t.Fatalf("timed out waiting for caddy replica: %s at seq %d: last_seq %s, blocks %d, events %v", w.spec.ID, last, seq, ws.Blocks, results)
			}
		}
	}
}

// warm posts a chat request straight to a simulator (no router), which caches its prompt and
// publishes the blocks.
func warm(t *testing.T, w *simWorker, body []byte) {
	t.Helper()
	res, err := http.Post(w.ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Errorf("warming %s: %v", w.spec.ID, err) // Errorf: also called from goroutines
		return
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("warming %s: status %d", w.spec.ID, res.StatusCode)
	}
}

// TestClusterReplicasCatchUp is DESIGN §9 on a real NATS cluster: three nats-server instances with
// routes, two simulated workers with 10-batch replay rings, a Caddy-free core replica that sees every
// event and an in-process Caddy replica that starts after the rings wrapped.
//
// (a) the late Caddy replica loads the workers' snapshots: its index equals the core replica's block
// for block and both route the warm requests with the same overlaps; (c) a Caddy restart rebuilds it
// the same way; (b) killing the NATS server the core replica and worker c-w2 use, under bounded load
// through the Caddy replica, loses no routing decision; c-w2's batches published while its server is
// down (more than its ring) are lost for both replicas, which fill the gap from its snapshot (nothing
// cleared) and converge again; the core replica, failed over, keeps receiving the Caddy replica's
// load on kvroute.sync.load.
func TestClusterReplicasCatchUp(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: runs a 3-node NATS cluster, wraps replay rings, restarts Caddy and kills a node under load, ~10 s")
	}
	c := startNATSCluster(t, 3)
	sims := []*simWorker{
		clusterSim(t, c, 0, "c-w1", 50*time.Millisecond, false),
		clusterSim(t, c, 1, "c-w2", 50*time.Millisecond, true),
	}
	core := startCore(t, c, 1, sims)
	var bodies [][]byte
	for i := range 24 {
		body := textBody(t, "qwen", longText(fmt.Sprintf("Cluster notes %d.", i), 200+10*i))
		bodies = append(bodies, body)
		warm(t, sims[i%2], body)
	}
	for _, w := range sims {
		if n := w.pub.Next(); n <= 10 {
			t.Fatalf("%s published %d batches: its 10-batch ring has not wrapped", w.spec.ID, n)
		}
		if held := w.pub.Held(); held[0].Seq == 0 {
			t.Fatalf("%s still holds seq 0", w.spec.ID)
		}
	}
	for _, w := range sims {
		core.waitSeq(t, w.spec.ID, w.pub.Next()-1)
	}

	t.Run("a: late replica loads snapshots", func(t *testing.T) {
		h := clusterCaddy(t, c, 0, sims)
		waitBoth(t, h, core, sims)
		sameIndexes(t, runningApp(t).KVIndex(), core)
		sameOverlaps(t, h, core, bodies)
		for _, w := range sims {
			if n := h.metric(t, "caddy_kvroute_events_total", `worker="`+w.spec.ID+`"`, `result="snapshot_loaded"`); n != 1 {
				t.Errorf("%s: snapshot_loaded %v, want 1", w.spec.ID, n)
			}
			if n := h.metric(t, "caddy_kvroute_events_total", `worker="`+w.spec.ID+`"`, `result="cleared"`); n != 0 {
				t.Errorf("%s: cleared %v, want 0", w.spec.ID, n)
			}
		}
		stopCaddy(t, h)
	})

	t.Run("c: restarted replica rebuilds exactly", func(t *testing.T) {
		for i := range 6 { // more events while the replica is down
			body := textBody(t, "qwen", longText(fmt.Sprintf("While down %d.", i), 300))
			bodies = append(bodies, body)
			warm(t, sims[i%2], body)
		}
		h := clusterCaddy(t, c, 0, sims)
		defer stopCaddy(t, h)
		waitBoth(t, h, core, sims)
		sameIndexes(t, runningApp(t).KVIndex(), core)
		sameOverlaps(t, h, core, bodies)
	})

	t.Run("b: losing a NATS server under load", func(t *testing.T) {
		h := clusterCaddy(t, c, 0, sims)
		defer stopCaddy(t, h)
		waitBoth(t, h, core, sims)
		const requests = 60
		var (
			wg       sync.WaitGroup
			answered atomic.Int64
			failed   atomic.Int64
			loadOnly atomic.Int64
			mu       sync.Mutex
			failures []string
		)
		for g := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g; i < requests; i += 2 {
					body := bodies[i%len(bodies)]
					if i%3 == 0 { // a new prompt: new blocks, new events during the outage
						body = textBody(t, "qwen", longText(fmt.Sprintf("Under load %d.", i), 150))
					}
					req, _ := http.NewRequest(http.MethodPost, h.base+"/v1/chat/completions", strings.NewReader(string(body)))
					req.Header.Set("Content-Type", "application/json")
					res, err := h.client.Do(req)
					if err != nil {
						failed.Add(1)
						mu.Lock()
						failures = append(failures, err.Error())
						mu.Unlock()
						continue
					}
					res.Body.Close()
					if res.StatusCode != 200 || res.Header.Get("X-Kvroute-Worker") == "" {
						failed.Add(1)
						mu.Lock()
						failures = append(failures, fmt.Sprintf("status %d worker %q", res.StatusCode, res.Header.Get("X-Kvroute-Worker")))
						mu.Unlock()
						continue
					}
					if fb := res.Header.Get("X-Kvroute-Fallback"); fb == "index_unavailable" {
						loadOnly.Add(1)
					}
					answered.Add(1)
				}
			}()
		}
		// The core replica, failed over to another server, still sees the Caddy replica's load.
		var sawLoad, killed atomic.Bool
		var replicasAfter atomic.Int64
		stopWatch := make(chan struct{})
		go func() {
			for {
				select {
				case <-stopWatch:
					return
				case <-time.After(10 * time.Millisecond):
				}
				if !killed.Load() {
					continue
				}
				for _, id := range core.worker {
					if core.sched.Tracker().Load(index.WorkerKey{ID: id}).Requests > 0 {
						sawLoad.Store(true)
					}
				}
				replicasAfter.Store(max(replicasAfter.Load(), int64(len(core.sync.Replicas()))))
			}
		}()
		loadedBefore := h.metric(t, "caddy_kvroute_events_total", `worker="c-w2"`, `result="snapshot_loaded"`)
		wait.For(t, "a third of the requests answered", func() bool { return answered.Load() >= requests/3 })
		// Server 1 goes: the core replica fails over to another server; c-w2, pinned to it, loses the
		// batches it publishes meanwhile (more than its 10-batch ring), which both replicas then miss.
		c.srvs[1].Shutdown()
		killed.Store(true)
		lostFrom := sims[1].pub.Next()
		var down sync.WaitGroup
		for i := range 12 {
			down.Add(1)
			go func() {
				defer down.Done()
				warm(t, sims[1], textBody(t, "qwen", longText(fmt.Sprintf("While server 1 is down %d.", i), 120)))
			}()
		}
		down.Wait()
		if lost := sims[1].pub.Next() - lostFrom; lost <= 10 {
			t.Fatalf("c-w2 published %d batches while its server was down, want more than its ring", lost)
		}
		c.restart(1)
		wait.For(t, "c-w2 reconnected", func() bool { return sims[1].pub.Connected() })
		// the Caddy replica never left server 0; the core replica is wherever it failed over to
		replicaServers := func() []string { return []string{"n0", core.nc.ConnectedServerName()} }
		// Route interest crosses the restarted server's routes after they count as up: until it
		// has, the next batch would be lost again, and the replay and snapshot requests would find
		// no responder. Both replicas' servers (the Caddy replica never left server 0) must see it.
		c.waitInterest(t, "c-w2", 1, replicaServers)
		warm(t, sims[1], textBody(t, "qwen", longText("Server 1 is back.", 120))) // the gap shows
		wg.Wait()
		close(stopWatch)
		// c-w1's last batches under load may have gone out while the core replica was failing over
		// (lost for it until another batch shows the gap): one more batch, once the interest has
		// crossed, makes the gap show.
		c.waitInterest(t, "c-w1", 0, replicaServers)
		warm(t, sims[0], textBody(t, "qwen", longText("All servers are back.", 120)))
		if failed.Load() != 0 || answered.Load() != requests {
			t.Fatalf("%d of %d requests answered with a routing decision; failures: %v", answered.Load(), requests, failures)
		}
		t.Logf("%d requests answered, %d routed on load alone (index_unavailable)", answered.Load(), loadOnly.Load())
		waitBoth(t, h, core, sims)
		sameIndexes(t, runningApp(t).KVIndex(), core)
		sameOverlaps(t, h, core, bodies)
		var counts []string
		for _, r := range []string{"gap", "replay_requested", "replayed", "snapshot_loaded", "snapshot_failed", "cleared"} {
			counts = append(counts, fmt.Sprintf("%s=%v", r, h.metric(t, "caddy_kvroute_events_total", `result="`+r+`"`)))
		}
		t.Logf("caddy replica event results through the outage: %s", strings.Join(counts, " "))
		if got := h.metric(t, "caddy_kvroute_events_total", `worker="c-w2"`, `result="snapshot_loaded"`) - loadedBefore; got != 1 {
			t.Errorf("caddy replica loaded %v snapshots of c-w2 after the outage, want 1", got)
		}
		if ws, _ := core.sub.Worker("c-w2"); ws.Events[subscriber.ResultSnapshotLoaded] != 1 || ws.Events[subscriber.ResultCleared] != 0 {
			t.Errorf("core replica c-w2 results %v: want one snapshot loaded (the gap), nothing cleared", ws.Events)
		}
		if !sawLoad.Load() || replicasAfter.Load() != 1 {
			t.Errorf("core replica after the outage: saw the caddy replica's load %v, replicas %d; want true, 1", sawLoad.Load(), replicasAfter.Load())
		}
	})
}
