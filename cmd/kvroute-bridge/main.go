// Command kvroute-bridge forwards an inference engine's KV events from ZMQ to NATS and registers the
// worker for kvroute (DESIGN.md §2). Run one per engine host; one process can bridge several workers
// (repeat --config). See docs/deploy-vllm.md and docs/deploy-sglang.md.
//
//	kvroute-bridge --worker-id w1 --endpoint http://10.0.0.5:8000 --model Qwen/Qwen3-VL-8B-Instruct \
//	    --engine vllm --zmq-endpoint tcp://127.0.0.1:5557 --replay-endpoint tcp://127.0.0.1:5558 \
//	    --topic kv-events --contract /etc/kvroute/contract.json --nats-url nats://router:4222
//
// It exits 0 after SIGINT or SIGTERM (deleting the worker records), 2 on a configuration error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/kvroute/kvroute/internal/natsutil"
	"github.com/kvroute/kvroute/kvevents/bridge"
	"github.com/kvroute/kvroute/routing/layout"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "kvroute-bridge: %v\n", err)
		if errors.Is(err, errUsage) || errors.Is(err, bridge.ErrConfig) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// errUsage marks command-line errors.
var errUsage = errors.New("usage")

// options are the parsed command line.
type options struct {
	workers    []bridge.WorkerConfig
	cfg        bridge.Config
	natsURL    string
	tokenFile  string // --nats-token-file; "" = natsutil's local default
	natsOpts   []nats.Option
	logLevel   zapcore.Level
	statsEvery time.Duration
}

// parseArgs parses the command line into options (no I/O beyond reading the files it names).
func parseArgs(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("kvroute-bridge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var configs stringList
	fs.Var(&configs, "config", "JSON file with one worker object or an array of them (repeatable); replaces the per-worker flags")
	var wf workerFlags
	wf.register(fs)
	natsURL := fs.String("nats-url", envOr("KVROUTE_NATS_URL", "nats://127.0.0.1:4222"), "NATS server URL(s), comma-separated (env KVROUTE_NATS_URL)")
	tokenFile := fs.String("nats-token-file", os.Getenv(natsutil.TokenFileEnv), "file holding the NATS token of kvroute's embedded server (env "+natsutil.TokenFileEnv+"; default: the router's token file for a loopback URL's port, when it exists)")
	creds := fs.String("nats-creds", "", "NATS credentials file (JWT + nkey seed)")
	nkey := fs.String("nats-nkey", "", "NATS nkey seed file")
	user := fs.String("nats-user", "", "NATS user (password from env KVROUTE_NATS_PASSWORD)")
	ca := fs.String("nats-ca", "", "CA file for NATS TLS")
	inbox := fs.String("nats-inbox-prefix", "", "inbox prefix for NATS replies, to scope per-worker permissions (e.g. _INBOX_w1)")
	ringBatches := fs.Int("ring-batches", 10000, "batches kept per rank to answer routers' replay requests")
	ringBytes := fs.Int64("ring-bytes", 64<<20, "bytes kept per rank to answer routers' replay requests")
	replayTimeout := fs.Duration("replay-timeout", 2*time.Second, "longest wait for the engine replay socket's next reply")
	noRegister := fs.Bool("no-register", false, "forward events only; do not write the worker record")
	adaptersRefresh := fs.Duration("adapters-refresh", bridge.DefaultAdaptersRefresh, "how often each worker's LoRA adapters are read again from its /v1/models (negative: once at registration)")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	statsEvery := fs.Duration("stats-interval", time.Minute, "log the forwarding counters this often (0: never)")
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if err := natsutil.CheckURLs(*natsURL); err != nil {
		return nil, fmt.Errorf("%w: --nats-url: %w", errUsage, err)
	}
	o := &options{natsURL: *natsURL, tokenFile: *tokenFile, statsEvery: *statsEvery}
	if err := o.logLevel.Set(*level); err != nil {
		return nil, fmt.Errorf("%w: --log-level: %w", errUsage, err)
	}
	if len(configs) > 0 {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for _, n := range []string{"worker-id", "endpoint", "model", "engine", "engine-version", "block-size", "metrics-url", "models-url", "engine-api-key-file", "dp-size", "features", "contract", "zmq-endpoint", "replay-endpoint", "topic", "encoding"} {
			if set[n] {
				return nil, fmt.Errorf("%w: --%s cannot be combined with --config", errUsage, n)
			}
		}
		for _, path := range configs {
			ws, err := loadConfigFile(path)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", errUsage, err)
			}
			o.workers = append(o.workers, ws...)
		}
	} else {
		w, err := wf.worker()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errUsage, err)
		}
		o.workers = []bridge.WorkerConfig{w}
	}
	for i := range o.workers {
		if err := o.workers[i].Normalize(); err != nil {
			return nil, err
		}
	}
	o.cfg = bridge.Config{
		Workers: o.workers, RingBatches: *ringBatches, RingBytes: *ringBytes, ReplayTimeout: *replayTimeout,
		DisableRegistration: *noRegister, AdaptersRefresh: *adaptersRefresh,
	}
	if *creds != "" {
		o.natsOpts = append(o.natsOpts, nats.UserCredentials(*creds))
	}
	if *nkey != "" {
		opt, err := nats.NkeyOptionFromSeed(*nkey)
		if err != nil {
			return nil, fmt.Errorf("%w: --nats-nkey: %w", errUsage, err)
		}
		o.natsOpts = append(o.natsOpts, opt)
	}
	if *user != "" {
		o.natsOpts = append(o.natsOpts, nats.UserInfo(*user, os.Getenv("KVROUTE_NATS_PASSWORD")))
	}
	if tok := os.Getenv("KVROUTE_NATS_TOKEN"); tok != "" {
		o.natsOpts = append(o.natsOpts, nats.Token(tok))
	}
	if *ca != "" {
		o.natsOpts = append(o.natsOpts, nats.RootCAs(*ca))
	}
	if *inbox != "" {
		o.natsOpts = append(o.natsOpts, nats.CustomInboxPrefix(*inbox))
	}
	return o, nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// checkContracts logs each worker's contract digest, or why kvroute's routers will not use it.
func checkContracts(log *zap.Logger, workers []bridge.WorkerConfig) {
	for _, w := range workers {
		if len(w.Contract) == 0 {
			log.Info("worker has no video contract: routers use text-prefix routing for its videos", zap.String("worker_id", w.WorkerID))
			continue
		}
		c, err := layout.ParseContract(w.Contract)
		if err == nil {
			err = c.Validate()
		}
		var digest string
		if err == nil {
			digest, err = c.Digest()
		}
		if err != nil {
			log.Warn("video contract is not usable by this kvroute version; publishing it unchanged", zap.String("worker_id", w.WorkerID), zap.Error(err))
			continue
		}
		log.Info("video contract", zap.String("worker_id", w.WorkerID), zap.String("digest", digest))
	}
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	o, err := parseArgs(args, stderr)
	if err != nil {
		return err
	}
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(o.logLevel)
	zc.Encoding = "console"
	zc.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	log, err := zc.Build()
	if err != nil {
		return fmt.Errorf("building logger: %w", err)
	}
	defer func() { _ = log.Sync() }()
	checkContracts(log, o.workers)

	ids := make([]string, len(o.workers))
	for i, w := range o.workers {
		ids[i] = w.WorkerID
	}
	// Keep retrying the first connection too (Background): the NATS server may start after the
	// bridge; the bridge opens the registry and registers with backoff (bridge/register.go).
	nc, err := natsutil.Connect(o.natsURL, &natsutil.ConnectConfig{Name: "kvroute-bridge " + strings.Join(ids, ","), Options: o.natsOpts, Logger: log, TokenFile: o.tokenFile, Background: true})
	if err != nil {
		return err
	}
	defer nc.Close()
	o.cfg.Logger = log
	b, err := bridge.New(nc, &o.cfg)
	if err != nil {
		return err
	}
	if err := b.Start(ctx); err != nil {
		return err
	}
	log.Info("kvroute-bridge started", zap.Strings("workers", ids), zap.String("nats_url", natsutil.RedactURLs(o.natsURL)), zap.Bool("nats_connected", nc.IsConnected()))
	var tick <-chan time.Time
	if o.statsEvery > 0 {
		t := time.NewTicker(o.statsEvery)
		defer t.Stop()
		tick = t.C
	}
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-tick:
			for _, s := range b.Stats() {
				log.Info("kv event bridge stats", zap.Any("stats", s))
			}
		}
	}
	log.Info("kvroute-bridge stopping: deregistering workers")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = b.Stop(sctx)
	if ferr := nc.FlushTimeout(2 * time.Second); ferr != nil && err == nil && nc.IsConnected() {
		err = fmt.Errorf("flushing nats: %w", ferr)
	}
	return err
}
