package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/kvroute/kvroute/internal/natsutil"
	"github.com/kvroute/kvroute/kvevents/registry"
)

// natsPool holds the shared NATS (*sharedNATS) keyed by the NATS settings. It lives for the whole
// process; each running config holds one reference between App.Start and App.Stop, so during a
// reload the old and the new config share one connection, and it closes when the last config
// using it stops.
var natsPool = caddy.NewUsagePool()

// natsConfig is the part of the app config that decides the shared NATS.
type natsConfig struct {
	url, creds     string
	host, storeDir string
	port           int
	tokenFile      string // embedded server's token file; "" = natsutil.DefaultTokenFile(port)
	noAuth         bool   // embedded server without a token
}

// sharedNATS is the NATS side of what survives config reloads (the shared kind of state; see
// doc.go): the embedded server (if any), the connection, the registry bucket and its watcher, the
// event core, the worker health record.
type sharedNATS struct {
	url      string
	embedded *natsutil.Embedded // nil when connected to a configured URL
	nc       *nats.Conn
	js       jetstream.JetStream
	watcher  *registry.Watcher
	// everConnected is set once the NATS connection was up (indexUnavailable).
	everConnected atomic.Bool
	created       time.Time
	logger        *zap.Logger
	// tokenFile is the embedded server's token file, removed with the server ("" without one).
	tokenFile string
	// accept is the newest started config's upstream_cidrs check of registry records (nil: all
	// accepted); the watcher logs joins and leaves of accepted records only.
	accept atomic.Pointer[func(registry.Worker) bool]

	// coreMu guards events, created by the first config that starts (see sharedNATS.core), and
	// running. Lock order: docs/LOCKS.md.
	coreMu sync.Mutex
	events *eventCore

	// running lists the started configs using this state with the settings they applied to the
	// event core, oldest first (guarded by coreMu; see sharedNATS.activate). The newest one's
	// settings are in force, and its worker list decides which health records are forgotten
	// (during a reload the old config's list would drop workers the new one added).
	running []runningConfig

	// respOnce starts attachResponses once; respCancel stops its retries (Destruct).
	respOnce   sync.Once
	respCancel context.CancelFunc

	// health is this replica's record of the workers marked down (health.go). It is kept here, not
	// per config, so a reload does not bring a dead worker back before a probe or a heartbeat does.
	health *workerHealth
}

// runningConfig is one started config of a sharedNATS.
type runningConfig struct {
	app      *App
	settings *coreSettings
}

// newSharedNATS starts the embedded server when no URL is configured, connects, opens the
// registry bucket and starts its watcher. On error everything started so far is stopped.
// accept (nil: every record) tells the watcher which records are used, so a refused one is not
// logged as registered.
func newSharedNATS(cfg natsConfig, logger *zap.Logger, accept func(registry.Worker) bool) (_ *sharedNATS, err error) {
	// st is not the named result: a failing `return nil, err` must not nil it before the cleanup.
	st := &sharedNATS{url: cfg.url, created: time.Now(), logger: logger,
		health: newWorkerHealth(caddy.Log().Named("kvroute.health"), nil)}
	st.setAccept(accept)
	defer func() {
		if err != nil {
			_ = st.Destruct()
		}
	}()
	tokenFile := ""
	if cfg.url == "" {
		tok := ""
		if !cfg.noAuth {
			if tok, err = natsutil.NewToken(); err != nil {
				return nil, err
			}
		}
		st.embedded, err = natsutil.StartEmbedded(&natsutil.EmbeddedConfig{
			Host: cfg.host, Port: cfg.port, StoreDir: cfg.storeDir, Logger: logger, Token: tok,
		})
		if err != nil {
			return nil, fmt.Errorf("starting embedded NATS server: %w", err)
		}
		st.url = st.embedded.ClientURL()
		if tok != "" {
			// local bridges and simulators read the token from this file (0600: same user only)
			tokenFile = cfg.tokenFile
			if tokenFile == "" {
				tokenFile = natsutil.DefaultTokenFile(st.embedded.Port())
			}
			if err = natsutil.WriteTokenFile(tokenFile, tok); err != nil {
				return nil, err
			}
			st.tokenFile = tokenFile
			logger.Info("embedded NATS server requires a token", zap.String("token_file", tokenFile))
		}
	}
	var opts []nats.Option
	if cfg.creds != "" {
		opts = append(opts, nats.UserCredentials(cfg.creds))
	}
	// In the background: Caddy starts (and serves, on load over its static workers) while NATS is
	// down or still electing, and connects, opens the registry and subscribes when it can
	// (DESIGN.md §2.1).
	st.nc, err = natsutil.Connect(st.url, &natsutil.ConnectConfig{Name: "kvroute", Options: opts, Logger: logger, TokenFile: tokenFile, Background: true})
	if err != nil {
		return nil, err
	}
	st.js, err = jetstream.New(st.nc)
	if err != nil {
		return nil, fmt.Errorf("opening JetStream: %w", err)
	}
	open := func(ctx context.Context) (jetstream.KeyValue, error) {
		if !st.nc.IsConnected() {
			return nil, errNATSNotConnected
		}
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		kv, _, err := registry.OpenRouterBucket(ctx, st.js, logger)
		return kv, err
	}
	st.watcher = registry.NewWatcherOpen(open, &registry.WatcherConfig{Logger: logger, Accepted: st.accepted})
	// the watch outlives any one config: it runs until Destruct
	if err = st.watcher.Start(context.Background()); err != nil {
		return nil, err
	}
	if st.nc.IsConnected() {
		// the registry's records before the first request, when NATS answers
		t := time.NewTimer(registryWait)
		defer t.Stop()
		select {
		case <-st.watcher.Ready():
		case <-t.C:
			logger.Warn("worker registry not loaded yet; continuing, it loads in the background", zap.Duration("waited", registryWait))
		}
	}
	return st, nil
}

// registryWait is how long a starting config waits for the registry's records when NATS is
// connected (a config started without NATS does not wait).
const registryWait = 5 * time.Second

// errNATSNotConnected is the registry opener's error before NATS is reachable.
var errNATSNotConnected = errors.New("NATS not connected yet")

// indexUnavailable returns why the index cannot hold KV events yet ("" once NATS has been
// connected: from then on the index follows the events, and a later outage keeps what it holds).
func (st *sharedNATS) indexUnavailable() string {
	if st.everConnected.Load() {
		return ""
	}
	if st.nc != nil && st.nc.IsConnected() {
		st.everConnected.Store(true)
		return ""
	}
	return "NATS not connected yet: the index has no KV events"
}

// Destruct stops the watcher, drains and closes the connection and shuts the embedded server
// down, in that order. It is called by the usage pool when the last config releases the shared NATS.
func (st *sharedNATS) Destruct() error {
	if st.respCancel != nil {
		st.respCancel()
	}
	st.stopCore()
	if st.watcher != nil {
		st.watcher.Stop()
	}
	if st.nc != nil {
		st.nc.Close()
	}
	if st.embedded != nil {
		st.embedded.Shutdown()
	}
	if st.tokenFile != "" {
		_ = os.Remove(st.tokenFile)
	}
	st.logger.Debug("kvroute shared NATS destroyed", zap.String("url", st.url))
	return nil
}

// SharedNATS is the read-only view of the app's NATS resources for other kvroute code (event
// subscriber, replica sync, tests).
type SharedNATS struct{ s *sharedNATS }

// Conn returns the NATS connection (shared across reloads; do not close it).
func (n *SharedNATS) Conn() *nats.Conn { return n.s.nc }

// JetStream returns the JetStream context of Conn.
func (n *SharedNATS) JetStream() jetstream.JetStream { return n.s.js }

// Registry returns the `kvroute_workers` bucket, nil until it could be opened (NATS late at boot).
func (n *SharedNATS) Registry() jetstream.KeyValue { return n.s.watcher.KV() }

// Watcher returns the registry watcher.
func (n *SharedNATS) Watcher() *registry.Watcher { return n.s.watcher }

// URL returns the URL connected to (the embedded server's client URL when embedded).
func (n *SharedNATS) URL() string { return n.s.url }

// TokenFile returns the embedded server's token file ("" when it requires no token or the app
// connects to a configured URL).
func (n *SharedNATS) TokenFile() string { return n.s.tokenFile }

// Embedded reports whether the app runs the embedded NATS server.
func (n *SharedNATS) Embedded() bool { return n.s.embedded != nil }

// Created returns when the shared NATS was created; a reload that keeps it keeps this time.
func (n *SharedNATS) Created() time.Time { return n.s.created }

// Interface guards
var _ caddy.Destructor = (*sharedNATS)(nil)

// setAccept installs the registry record check of the config that starts now (nil: every record).
func (st *sharedNATS) setAccept(accept func(registry.Worker) bool) {
	if accept == nil {
		st.accept.Store(nil)
		return
	}
	st.accept.Store(&accept)
}

// accepted reports whether the current config uses the registry record w.
func (st *sharedNATS) accepted(w registry.Worker) bool {
	if f := st.accept.Load(); f != nil {
		return (*f)(w)
	}
	return true
}
