package caddymodule

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/kvroute/kvroute/kvevents/registry"
	"github.com/kvroute/kvroute/kvevents/respmap"
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
	// health is this replica's record of down-marked workers, the shared NATS's (kept across
	// reloads); nil (every worker healthy) before Start.
	health  atomic.Pointer[workerHealth]
	allow   *upstreamAllowList
	refused sync.Map // "worker_id|endpoint" of refused records already logged

	// mu guards state, stop, done, events and routing (the app's running lifetime).
	mu      sync.Mutex
	nats    *sharedNATS
	stop    context.CancelFunc
	done    chan struct{}
	events  *eventCore   // shared with other configs through the shared NATS
	routing *routingCore // this config's router; nil without model_dir

	// responses is the process's stored-response map (responses.go), kept across reloads in
	// sharedPool.
	responses *respmap.Map

	// shared are this config's references to what survives reloads in sharedPool (shared.go):
	// caches, the stored-response map, the media budget. Taken by Provision, released by Cleanup.
	shared sharedRefs

	// model is the model folder loaded by Validate (nil without model_dir); Start builds the
	// router on it.
	model *loadedModel

	// workers is the merged (static + live) worker list, sorted by id, with its router view;
	// replaced, never mutated. Read lock-free on the request path.
	workers atomic.Pointer[workerSet]

	// decider computes routing decisions; see Decider.
	decider atomic.Pointer[deciderBox]

	// lastKnownLogged is set once this config logged routing to the last-known records
	// (registryRecords).
	lastKnownLogged atomic.Bool

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

// deciderBox lets an interface value live in an atomic.Pointer.
type deciderBox struct{ d Decider }

// Interface guards
var (
	_ caddy.App          = (*App)(nil)
	_ caddy.Provisioner  = (*App)(nil)
	_ caddy.Validator    = (*App)(nil)
	_ caddy.CleanerUpper = (*App)(nil)
)
