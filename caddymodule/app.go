package caddymodule

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvroute/kvroute/kvevents/respmap"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/kvroute/kvroute/internal/natsutil"
	"github.com/kvroute/kvroute/kvevents/registry"
	"github.com/kvroute/kvroute/media"
)

func init() {
	caddy.RegisterModule(new(App))
}

// App is the `kvroute` app. It owns the NATS connection (to a configured NATS cluster, or to an
// embedded NATS server it starts on loopback when no URL is configured), the worker registry
// watcher and, later, the KV block index. Those live in a UsagePool, so a config reload that keeps
// the same NATS settings keeps them (DESIGN.md §9).
type App struct {
	// NATSURL is the NATS server or cluster URL (comma-separated for several seeds), e.g.
	// `nats://nats-1:4222,nats://nats-2:4222`. Placeholders such as `{env.NATS_URL}` are expanded.
	// Default: empty, which starts an embedded NATS server on loopback (see EmbeddedNATS).
	NATSURL string `json:"nats_url,omitempty"`

	// NATSCredentials is the path of a NATS credentials (.creds) file used when connecting to
	// NATSURL. Placeholders are expanded. Default: none.
	NATSCredentials string `json:"nats_credentials,omitempty"`

	// EmbeddedNATS configures the embedded NATS server started when NATSURL is empty.
	// Default: 127.0.0.1:4222 with JetStream stored in a temporary directory.
	EmbeddedNATS *EmbeddedNATS `json:"embedded_nats,omitempty"`

	// Workers are static worker records, merged with the live ones from the `kvroute_workers`
	// bucket (a static record wins over a live one with the same id). Default: none.
	Workers []StaticWorker `json:"workers,omitempty"`

	// UpstreamCIDRs are the address ranges (CIDR or single address) worker endpoints from the
	// registry must fall in; a record pointing elsewhere (or at a host name resolving elsewhere)
	// is refused and logged. The static workers' addresses are always allowed. Default:
	// DefaultUpstreamCIDRs (loopback and private ranges).
	UpstreamCIDRs []string `json:"upstream_cidrs,omitempty"`

	// HealthChecks configures passive failure detection and the active health probes of every
	// worker (see HealthChecks). Default: GET /health every 5s, 2s timeout.
	HealthChecks *HealthChecks `json:"health_checks,omitempty"`

	// MemoryLimit is the process's soft memory limit in bytes (runtime/debug.SetMemoryLimit); -1
	// (Caddyfile `off`) sets none. An operator's GOMEMLIMIT environment variable wins. Default:
	// derived from the budgets (memlimit.go: the Go memory at start + media max_inflight_bytes +
	// tokenize_cache_size + 2 × template_cache_size + 512 MiB).
	MemoryLimit *int64 `json:"memory_limit,omitempty"`

	// RoutingConfig holds the routing core's settings (model_dir, media, scheduler, index);
	// its fields sit directly in the app's JSON.
	RoutingConfig

	ctx     caddy.Context
	logger  *zap.Logger
	poolKey string
	static  []registry.Worker
	metrics *metrics
	// health is this replica's record of down-marked workers, the NATS state's (kept across
	// reloads); nil (every worker healthy) before Start.
	health  atomic.Pointer[workerHealth]
	allow   *upstreamAllowList
	refused sync.Map // "worker_id|endpoint" of refused records already logged

	// mu guards state, stop, done, events and routing (the app's running lifetime).
	mu      sync.Mutex
	state   *natsState
	stop    context.CancelFunc
	done    chan struct{}
	events  *eventCore   // shared with other configs through the NATS state
	routing *routingCore // this config's router; nil without model_dir

	// responses is the process's stored-response map (responses.go), kept across reloads.
	responses *respmap.Map

	// model is the model folder loaded by Validate (nil without model_dir); Start builds the
	// router on it.
	model *loadedModel

	// workers is the merged (static + live) worker list, sorted by id, with its router view;
	// replaced, never mutated. Read lock-free on the request path.
	workers atomic.Pointer[workerSet]

	// decider computes routing decisions; see Decider.
	decider atomic.Pointer[deciderBox]

	// started is closed when Start has installed the worker list and the router (or failed, or
	// the app stopped): during a reload Caddy may start the new HTTP servers before this app, and
	// the handler waits for it instead of routing without workers.
	started     chan struct{}
	startedOnce sync.Once
}

// EmbeddedNATS configures the embedded NATS server.
type EmbeddedNATS struct {
	// Host is the listen address; it must be a loopback address (the token only keeps other
	// local processes out; the server has no TLS). Default: 127.0.0.1.
	Host string `json:"host,omitempty"`

	// Port is the client port. -1 picks a free port (tests). Default: 4222, the standard NATS port,
	// so kvroute-sim and kvroute-bridge on the same machine connect with their defaults.
	Port int `json:"port,omitempty"`

	// StoreDir is the JetStream store directory. Default: a temporary directory removed when the
	// server stops.
	StoreDir string `json:"store_dir,omitempty"`

	// TokenFile is where the server's token is written (mode 0600, a new random token at every
	// start, removed at stop): the server requires it from every client, so other local
	// processes cannot inject KV events or worker records. kvroute-bridge and kvroute-sim of the
	// same user read it from the default place by their NATS URL's port, or from
	// --nats-token-file / KVROUTE_NATS_TOKEN_FILE. Default:
	// $XDG_CONFIG_HOME/kvroute/nats-<port>.token (~/.config/kvroute/...).
	TokenFile string `json:"token_file,omitempty"`

	// NoAuth starts the server without a token (any local process may publish). Default: false.
	NoAuth bool `json:"no_auth,omitempty"`
}

// StaticWorker is a worker declared in the configuration instead of the registry bucket.
type StaticWorker struct {
	registry.Worker

	// ContractFile is the path of the worker's video contract JSON (DESIGN.md §2.3), read at
	// provision time into `contract`. Default: none.
	ContractFile string `json:"contract_file,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (*App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "kvroute",
		New: func() caddy.Module { return new(App) },
	}
}

// Provision sets defaults, expands placeholders and validates the static workers. It does not touch
// the network; Start does.
func (a *App) Provision(ctx caddy.Context) error {
	a.ctx = ctx
	a.logger = ctx.Logger()
	// FFmpeg's log (process-wide) goes through zap at debug level, never raw to stderr.
	media.SetLogger(caddy.Log().Named("kvroute.ffmpeg"))
	repl := caddy.NewReplacer()
	a.NATSURL = repl.ReplaceAll(a.NATSURL, "")
	a.NATSCredentials = repl.ReplaceAll(a.NATSCredentials, "")
	if a.EmbeddedNATS == nil {
		a.EmbeddedNATS = new(EmbeddedNATS)
	}
	if a.EmbeddedNATS.Host == "" {
		a.EmbeddedNATS.Host = "127.0.0.1"
	}
	if a.EmbeddedNATS.Port == 0 {
		a.EmbeddedNATS.Port = natsutil.DefaultEmbeddedPort
	}
	a.EmbeddedNATS.StoreDir = repl.ReplaceAll(a.EmbeddedNATS.StoreDir, "")
	a.EmbeddedNATS.TokenFile = repl.ReplaceAll(a.EmbeddedNATS.TokenFile, "")
	if err := a.provisionRouting(repl); err != nil {
		return err
	}
	a.responses = responseMap(a.APIs.maxResponses(), a.APIs.ttl(), caddy.Log().Named("kvroute.responses"))

	a.static = a.static[:0]
	seen := map[string]bool{}
	for i, sw := range a.Workers {
		w := sw.Worker
		if sw.ContractFile != "" {
			b, err := os.ReadFile(repl.ReplaceAll(sw.ContractFile, ""))
			if err != nil {
				return fmt.Errorf("reading contract of worker %d (%s): %w", i, w.WorkerID, err)
			}
			if !json.Valid(b) {
				return fmt.Errorf("reading contract of worker %d (%s): %s is not valid JSON", i, w.WorkerID, sw.ContractFile)
			}
			w.Contract = json.RawMessage(b)
		}
		if err := w.Normalize(); err != nil {
			return fmt.Errorf("provisioning worker %d: %w", i, err)
		}
		if seen[w.WorkerID] {
			return fmt.Errorf("provisioning worker %d: duplicate worker_id %q", i, w.WorkerID)
		}
		seen[w.WorkerID] = true
		a.static = append(a.static, w)
	}
	a.workers.Store(newWorkerSet(registry.Merge(a.static, nil)))
	allow, err := newUpstreamAllowList(a.UpstreamCIDRs, a.static)
	if err != nil {
		return err
	}
	a.allow = allow

	if a.NATSURL != "" {
		a.poolKey = "nats_url=" + a.NATSURL + ";creds=" + a.NATSCredentials
	} else {
		a.poolKey = "embedded=" + a.EmbeddedNATS.Host + ":" + strconv.Itoa(a.EmbeddedNATS.Port) + ";store=" + a.EmbeddedNATS.StoreDir +
			";token_file=" + a.EmbeddedNATS.TokenFile + ";no_auth=" + strconv.FormatBool(a.EmbeddedNATS.NoAuth)
		if a.EmbeddedNATS.Port == natsutil.RandomPort {
			// a random port cannot be shared by key between configs that did not agree on it
			a.poolKey += ";random"
		}
	}

	m, err := registerMetrics(ctx.GetMetricsRegistry())
	if err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	if a.HealthChecks == nil {
		a.HealthChecks = new(HealthChecks)
	}
	a.HealthChecks.setDefaults()
	a.metrics = m
	if a.decider.Load() == nil {
		a.decider.Store(&deciderBox{NoPreference{}})
	}
	a.started = make(chan struct{})
	return nil
}

// markStarted releases the handlers waiting in waitStarted. Safe to call more than once.
func (a *App) markStarted() {
	if a.started != nil {
		a.startedOnce.Do(func() { close(a.started) })
	}
}

// waitStarted blocks until the app has started (or failed to), ctx ends, or max elapses.
func (a *App) waitStarted(ctx context.Context, max time.Duration) {
	if a.started == nil {
		return
	}
	select {
	case <-a.started:
		return
	default:
	}
	t := time.NewTimer(max)
	defer t.Stop()
	select {
	case <-a.started:
	case <-ctx.Done():
	case <-t.C:
	}
}

// Validate checks the configuration.
func (a *App) Validate() error {
	if a.NATSURL == "" && a.NATSCredentials != "" {
		return fmt.Errorf("nats_credentials needs nats_url")
	}
	if p := a.EmbeddedNATS.Port; p < natsutil.RandomPort || p > 65535 {
		return fmt.Errorf("embedded_nats port %d must be -1 (random) or 1-65535", p)
	}
	if a.NATSURL == "" {
		if h := a.EmbeddedNATS.Host; h != "localhost" {
			if ip, err := netip.ParseAddr(h); err != nil || !ip.IsLoopback() {
				return fmt.Errorf("embedded_nats host %q must be a loopback address (the embedded server has no authentication)", h)
			}
		}
	}
	if err := a.RoutingConfig.validateRouting(); err != nil {
		return err
	}
	// `caddy validate` provisions and validates without starting: the model folder is loaded
	// here, so a missing or broken model_dir fails validation as it fails `caddy run`.
	_, err := a.loadModel()
	return err
}

// Start connects to NATS (starting the embedded server if needed) through the usage pool, so a
// reload with the same NATS settings reuses the running connection, and starts following the
// worker registry.
func (a *App) Start() error {
	defer a.markStarted() // also on failure: waiting handlers then proceed (their config is rejected)
	val, _, err := natsPool.LoadOrNew(a.poolKey, func() (caddy.Destructor, error) {
		return newNATSState(a.natsConfig(), caddy.Log().Named("kvroute.nats"), a.recordAllowed)
	})
	if err != nil {
		return fmt.Errorf("starting kvroute NATS: %w", err)
	}
	st := val.(*natsState)
	st.setAccept(a.recordAllowed) // a reused connection follows this config's upstream_cidrs
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	a.mu.Lock()
	a.state, a.stop, a.done = st, cancel, done
	a.mu.Unlock()
	a.health.Store(st.health)
	st.attachResponses(a.responses, a.APIs.ttl())
	if err := a.startRouting(st); err != nil {
		cancel()
		close(done)
		_ = a.Stop()
		return fmt.Errorf("starting kvroute routing: %w", err)
	}
	a.refreshWorkers()
	a.applyMemoryLimit()
	release := startFreer(caddy.Log().Named("kvroute.memory"))
	go func() { <-ctx.Done(); release() }()
	p := &prober{cfg: *a.HealthChecks, client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
		health: st.health, workers: a.WorkerList, lastSeen: st.watcher.LastSeen}
	go p.run(ctx)
	changes, unsub := st.watcher.Subscribe()
	go func() {
		defer close(done)
		defer unsub()
		defer func() {
			if r := recover(); r != nil {
				a.logger.Error("worker list refresher panicked", zap.Any("panic", r), zap.Stack("stack"))
			}
		}()
		gauges := time.NewTicker(5 * time.Second)
		defer gauges.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-changes:
				a.refreshWorkers()
			case <-gauges.C:
				a.updateIndexGauges()
			}
		}
	}()
	a.metrics.state.setApp(a)
	a.logger.Info("kvroute app started", zap.String("nats", st.url), zap.Bool("embedded", st.embedded != nil), zap.Int("static_workers", len(a.static)))
	return nil
}

// Stop stops following the registry and releases this config's reference to the NATS state; the
// last config to release it closes the connection and the embedded server.
func (a *App) Stop() error {
	defer a.markStarted()
	if a.metrics != nil {
		a.metrics.state.clearApp(a)
	}
	a.mu.Lock()
	stop, done, st := a.stop, a.done, a.state
	a.stop, a.done, a.state = nil, nil, nil
	a.mu.Unlock()
	if stop == nil {
		return nil
	}
	st.deactivate(a)
	stop()
	<-done
	a.mu.Lock()
	rcore := a.routing
	a.routing, a.events = nil, nil
	// Nothing heavy stays reachable from a stopped config: the old App outlives its Stop (Caddy's
	// modules of that config still point to it), and every reload otherwise kept the replaced
	// model (tokenizer, template, caches) and router alive, ~17 MB per reload with the test model.
	// A request of the old config still in flight routes on load alone.
	a.model = nil
	a.mu.Unlock()
	a.decider.Store(&deciderBox{NoPreference{}})
	rcore.close()
	if _, err := natsPool.Delete(a.poolKey); err != nil {
		return fmt.Errorf("releasing kvroute NATS: %w", err)
	}
	return nil
}

func (a *App) natsConfig() natsConfig {
	return natsConfig{
		url:       a.NATSURL,
		creds:     a.NATSCredentials,
		host:      a.EmbeddedNATS.Host,
		port:      a.EmbeddedNATS.Port,
		storeDir:  a.EmbeddedNATS.StoreDir,
		tokenFile: a.EmbeddedNATS.TokenFile,
		noAuth:    a.EmbeddedNATS.NoAuth,
	}
}

func (a *App) refreshWorkers() {
	a.mu.Lock()
	st := a.state
	a.mu.Unlock()
	var live []registry.Worker
	if st != nil {
		live = a.filterLive(st.watcher.Snapshot())
	}
	merged := registry.Merge(a.static, live)
	set := newWorkerSet(merged)
	a.workers.Store(set)
	if st != nil {
		if owner := st.newest(); owner == a || owner == nil {
			st.health.forget(merged)
		}
	}
	a.mu.Lock()
	ec, rcore := a.events, a.routing
	a.mu.Unlock()
	if ec != nil {
		ec.sub.SetWorkers(merged)
	}
	if rcore != nil {
		// the router gets the list here, when it changes, not with every request
		rcore.router.SetWorkers(set.routed)
		vals := map[string]float64{}
		for _, ag := range rcore.router.Agreements(set.routed) {
			vals[ag.Model] = 0
			if ag.Agreed {
				vals[ag.Model] = 1
			}
		}
		newest := true
		if st != nil {
			owner := st.newest()
			newest = owner == a || owner == nil
		}
		if newest {
			a.metrics.agreementSeries.set(vals) // the models of the newest config only
		}
	}
}

// WorkerList returns the current workers (static and live), sorted by worker id. The slice is shared:
// do not modify it. Safe for concurrent use; lock-free.
func (a *App) WorkerList() []registry.Worker { return a.workers.Load().all }

// WorkerByEndpoint returns the worker whose normalized endpoint is ep.
func (a *App) WorkerByEndpoint(ep string) (registry.Worker, bool) {
	for _, w := range a.WorkerList() {
		if w.Endpoint == ep {
			return w, true
		}
	}
	return registry.Worker{}, false
}

// NATS returns the app's NATS connection state, or nil before Start and after Stop.
func (a *App) NATS() *NATSState {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.state == nil {
		return nil
	}
	return &NATSState{s: a.state}
}

// Decider returns the routing decider in use.
func (a *App) Decider() Decider {
	if b := a.decider.Load(); b != nil {
		return b.d
	}
	return NoPreference{}
}

// SetDecider replaces the routing decider (the index and scheduler install theirs; tests inject
// one). Safe for concurrent use.
func (a *App) SetDecider(d Decider) { a.decider.Store(&deciderBox{d}) }

// deciderBox lets an interface value live in an atomic.Pointer.
type deciderBox struct{ d Decider }

// Interface guards
var (
	_ caddy.App         = (*App)(nil)
	_ caddy.Provisioner = (*App)(nil)
	_ caddy.Validator   = (*App)(nil)
)
