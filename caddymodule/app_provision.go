package caddymodule

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/kvroute/kvroute/internal/natsutil"
	"github.com/kvroute/kvroute/kvevents/registry"
	"github.com/kvroute/kvroute/media"
	"github.com/kvroute/kvroute/routing/layout"
	"github.com/kvroute/kvroute/routing/model"
	"github.com/kvroute/kvroute/routing/tokenizer"
)

// Provision and Validate of the `kvroute` app: settings and defaults, the model folder, the
// references to what survives reloads (shared.go). Nothing here touches the network.

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
	a.warnIgnoredEmbedded(a.logger)
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
	if err := a.acquireResponses(); err != nil {
		return err
	}
	if err := a.acquireLastKnown(); err != nil {
		return err
	}
	if err := a.acquireBudget(); err != nil {
		return err
	}
	return a.acquireCaches()
}

// warnIgnoredEmbedded logs that an embedded_nats block beside nats_url has no effect: the embedded
// server starts only without nats_url. A warning, not an error, so a configuration that kept the
// block after moving to a cluster still loads (operator test: it passed `caddy validate` in silence).
func (a *App) warnIgnoredEmbedded(log *zap.Logger) {
	if a.NATSURL != "" && a.EmbeddedNATS != nil {
		log.Warn("embedded_nats has no effect: nats_url is set, and the embedded NATS server starts only without it; remove one of them")
	}
}

// Validate checks the configuration.
func (a *App) Validate() error {
	if a.NATSURL == "" && a.NATSCredentials != "" {
		return fmt.Errorf("nats_credentials needs nats_url")
	}
	if a.NATSURL != "" {
		if err := natsutil.CheckURLs(a.NATSURL); err != nil {
			return fmt.Errorf("nats_url: %w", err)
		}
	}
	if a.NATSCredentials != "" {
		// Start reads the file and fails without it; a missing or unreadable credentials file is
		// a configuration error, not a NATS outage, so `caddy validate` reports it too.
		f, err := os.Open(a.NATSCredentials)
		if err != nil {
			return fmt.Errorf("nats_credentials: %w", err)
		}
		f.Close()
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

// loadModel loads and checks the configured model folder (tokenizer, chat template, config.json
// and, for a vision model, the processor configs); nil without model_dir. Validate calls it, so
// `caddy validate` rejects a model_dir that Start would reject; the result is kept and Start does
// not read the folder again.
func (a *App) loadModel() (*loadedModel, error) {
	if a.ModelDir == "" {
		return nil, nil
	}
	if a.model != nil {
		return a.model, nil
	}
	m, err := model.Load(a.ModelDir)
	if err != nil {
		return nil, fmt.Errorf("loading model: %w", err)
	}
	// Bounded tokenization (DESIGN.md §6 "Prompts"): a pre-token over 256 KiB routes on load
	// alone (prompt_too_costly). Set here, before the tokenizer is shared.
	m.Tokenizer.SetMaxWordBytes(tokenizer.DefaultMaxWordBytes)
	lm := &loadedModel{model: m}
	if m.Vision {
		if lm.layout, err = layout.LoadModel(a.ModelDir); err != nil {
			return nil, fmt.Errorf("loading model processor config: %w", err)
		}
	}
	a.model = lm
	return lm, nil
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
