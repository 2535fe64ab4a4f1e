// Command kvroute-sim is a stand-in for a stock vLLM worker with prefix caching (DESIGN.md §11): it
// serves /v1/chat/completions (JSON, or SSE with "stream": true), /v1/models, /health and
// /reset_prefix_cache with a configurable prefill and per-token latency. It renders and tokenizes
// each request with a model folder, fetches and decodes its media itself with the contract it
// publishes, keeps a vLLM-like block cache, reports cached_tokens as vLLM does (and the hit in the
// X-Kvroute-Sim-Hit-Blocks header), and with a NATS URL publishes vLLM-format KV events on
// kvroute.events.<worker_id>, answers replay requests and registers itself in the kvroute worker
// registry (heartbeat every 10 s, record deleted on shutdown). The worker lives in internal/sim.
//
// Usage:
//
//	kvroute-sim -listen 127.0.0.1:8001 -worker-id sim-1 -served-model-name qwen \
//	    -model testdata/golden/qwen3vl-test-model -contract contract.json \
//	    -nats nats://127.0.0.1:4222 -prefill-delay 50ms -token-delay 10ms
//
// -prefill-per-token and -max-running make time to first token follow caching and load: prefill
// takes -prefill-delay plus the per-token time of each uncached prompt token, one prefill at a time
// per worker, and at most -max-running sequences run at once with a queue beyond (internal/sim
// engine.go).
//
// -lora-modules name=path (repeatable) serves LoRA adapters as vLLM's --enable-lora --lora-modules
// does: /v1/models lists them with parent, a request naming one is cached under it (lora_name in its
// events), the registry record lists them, and POST /v1/load_lora_adapter and /v1/unload_lora_adapter
// change them at run time.
//
// -model also accepts a served model name that is not a directory (the first version's meaning of
// the flag): the default model folder is loaded then. When the default folder is missing and -model
// was not given, the simulator counts words instead of tokens and caches nothing.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/kvroute/kvroute/internal/natsutil"
	"github.com/kvroute/kvroute/internal/sim"
	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/media/fetch"
	"github.com/kvroute/kvroute/routing/apis"
	"github.com/kvroute/kvroute/routing/mediaport"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "kvroute-sim:", err)
		os.Exit(1)
	}
}

type flags struct {
	listen, advertise, workerID, model, served, natsURL string
	natsTokenFile                                       string
	contract, oracle, encoding, extraKeys, features     string
	fileRoot, inlineSystem, disabledEffort, codecs      string
	blockSize, cacheBlocks, maxTokens, replayBatches    int
	maxRunning                                          int
	replayBytes                                         int64
	prefill, perToken, prefillPerToken                  time.Duration
	modelSet, hybrid, blockSizeSet                      bool
	loraModules                                         []sim.LoRAModule
}

// hybridBlockSize is -block-size's default with -hybrid: a Qwen3.5 attention block size observed with
// vLLM's prefix caching (528–2096 depending on model, TP and dtype).
const hybridBlockSize = 1056

func parseFlags(args []string) (*flags, error) {
	f := &flags{}
	fs := flag.NewFlagSet("kvroute-sim", flag.ContinueOnError)
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8001", "listen address (host:port)")
	fs.StringVar(&f.advertise, "advertise", "", "endpoint published in the registry (default: the listen address)")
	fs.StringVar(&f.workerID, "worker-id", "sim-1", "worker id ([A-Za-z0-9_-]{1,64})")
	fs.StringVar(&f.model, "model", sim.DefaultModelDir, "model folder (tokenizer.json, chat template, config.json); a value that is not a directory is taken as -served-model-name")
	fs.StringVar(&f.served, "served-model-name", "kvroute-sim", "served model name (the request's model field)")
	fs.StringVar(&f.contract, "contract", "", "video contract JSON file (default: the hub hf_fps contract of DESIGN.md §2.3; for a Nemotron 3 Nano Omni model folder, layout.NemotronContractJSON)")
	fs.StringVar(&f.oracle, "oracle-tokens", "", "JSON array file of the worker-visible prompt token ids used for every request (oracle mode)")
	fs.IntVar(&f.blockSize, "block-size", 16, "KV block size in tokens (with -hybrid: the full-attention group's, default 1056)")
	fs.BoolVar(&f.hybrid, "hybrid", false, "publish KV events like a hybrid vLLM worker (Qwen3.5): a full-attention group beside a Mamba group whose stores are not dense, with group_idx and kv_cache_spec_kind")
	fs.IntVar(&f.cacheBlocks, "cache-blocks", 8192, "prefix cache capacity in blocks (LRU beyond it)")
	fs.StringVar(&f.encoding, "encoding", "map", "KV event encoding: map (tagged map events) or array (positional events)")
	fs.StringVar(&f.extraKeys, "extra-keys", "pair", "media keys in extra_keys: pair ([identifier, offset], current vLLM) or bare (older vLLM)")
	fs.IntVar(&f.replayBatches, "replay-batches", 10000, "published batches kept for replay")
	fs.Int64Var(&f.replayBytes, "replay-bytes", 64<<20, "payload bytes kept for replay")
	fs.StringVar(&f.features, "features", "", "comma-separated worker features for the registry record")
	fs.StringVar(&f.fileRoot, "media-file-root", "", "directory file: media URLs may read from (default: file: URLs refused)")
	fs.StringVar(&f.codecs, "codecs", "vp8,vp9", "comma-separated video codecs the simulator decodes (av1, h264, hevc, vp8, vp9), as the worker's FFmpeg would")
	fs.StringVar(&f.natsURL, "nats", "", "NATS URL for KV events and the worker registry (empty: neither)")
	fs.StringVar(&f.natsTokenFile, "nats-token-file", os.Getenv(natsutil.TokenFileEnv), "file holding the NATS token of kvroute's embedded server (env "+natsutil.TokenFileEnv+"; default: the router's token file for a loopback URL's port, when it exists)")
	fs.DurationVar(&f.prefill, "prefill-delay", 0, "delay before the first token")
	fs.DurationVar(&f.perToken, "token-delay", 0, "delay before each further token (decode time per output token)")
	fs.DurationVar(&f.prefillPerToken, "prefill-per-token", 0, "prefill time per uncached prompt token, added to -prefill-delay; prefills then run one at a time, in arrival order (0: prefill takes -prefill-delay and never waits)")
	fs.IntVar(&f.maxRunning, "max-running", 0, "sequences running at once (vLLM max_num_seqs); requests beyond it wait in arrival order (0: unbounded)")
	fs.IntVar(&f.maxTokens, "max-tokens", 8, "completion tokens when the request sets none")
	fs.Func("lora-modules", "a LoRA adapter served under the model, name=path or vLLM's JSON form (repeatable; vLLM's --lora-modules)", func(v string) error {
		m, err := sim.ParseLoRAModule(v)
		if err == nil {
			f.loraModules = append(f.loraModules, m)
		}
		return err
	})
	fs.StringVar(&f.inlineSystem, "anthropic-inline-system", "preserve", "vLLM's inline_system for /v1/messages: preserve or fold")
	fs.StringVar(&f.disabledEffort, "anthropic-disabled-thinking-effort", "none", "the reasoning_effort /v1/messages gives thinking disabled: none or low")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if f.natsURL != "" {
		if err := natsutil.CheckURLs(f.natsURL); err != nil {
			return nil, fmt.Errorf("-nats: %w", err)
		}
	}
	fs.Visit(func(fl *flag.Flag) {
		f.modelSet = f.modelSet || fl.Name == "model"
		f.blockSizeSet = f.blockSizeSet || fl.Name == "block-size"
	})
	if f.hybrid && !f.blockSizeSet {
		f.blockSize = hybridBlockSize
	}
	return f, nil
}

func run(args []string) error {
	f, err := parseFlags(args)
	if err != nil {
		return err
	}
	logger, err := zap.NewProduction()
	if err != nil {
		return fmt.Errorf("creating logger: %w", err)
	}
	defer func() { _ = logger.Sync() }()
	logger = logger.With(zap.String("worker_id", f.workerID))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// Bind the port before anything is announced on NATS: creating the event publisher sends
	// the worker's reset (its cache starts empty), and a second simulator started by mistake on
	// a busy port must fail without wiping the running worker's blocks from every router.
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", f.listen, err)
	}
	defer ln.Close()
	// Serve at once: until the worker id is claimed (which waits for NATS) every request gets a
	// 503 saying so, instead of hanging in the listen backlog (an operator's health check hung).
	var handler switchHandler
	handler.set(http.HandlerFunc(startingHandler))
	srv := &http.Server{Handler: &handler, ReadHeaderTimeout: 10 * time.Second}
	defer srv.Close()
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	var nc *nats.Conn
	if f.natsURL != "" {
		// Background: a simulator started with or before NATS waits for it instead of exiting.
		if nc, err = natsutil.Connect(f.natsURL, &natsutil.ConnectConfig{Name: "kvroute-sim " + f.workerID, Logger: logger, TokenFile: f.natsTokenFile, Background: true}); err != nil {
			return err
		}
		defer nc.Close()
		// Before the event publisher announces the worker's reset (which empties its blocks on
		// every router): a second simulator with a running one's -worker-id must not start.
		if err := sim.ClaimWorkerIDWait(ctx, nc, f.workerID, logger); err != nil {
			return err
		}
	}
	cfg, pub, err := worker(f, nc, logger)
	if err != nil {
		return err
	}
	if pub != nil {
		defer func() { _ = pub.Close() }()
	}
	s := sim.New(cfg)
	handler.set(s.Handler())
	logger.Info("kvroute-sim listening", zap.String("addr", ln.Addr().String()), zap.String("model", cfg.Model),
		zap.Bool("prefix_caching", cfg.Frontend != nil), zap.Int("block_size", s.Config().BlockSize))

	var reg *sim.Registration
	if nc != nil {
		ep := f.advertise
		if ep == "" {
			ep = advertised(ln.Addr().(*net.TCPAddr))
		}
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		reg, err = sim.RegisterConn(rctx, nc, ep, s, logger)
		cancel()
		if err != nil {
			_ = srv.Close()
			return fmt.Errorf("registering worker: %w", err)
		}
		logger.Info("worker registered", zap.String("endpoint", ep))
	}

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		if !errors.Is(err, http.ErrServerClosed) {
			logger.Error("serving", zap.Error(err))
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if reg != nil {
		if err := reg.Close(sctx); err != nil {
			logger.Warn("deregistering worker", zap.Error(err))
		}
	}
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	logger.Info("kvroute-sim stopped")
	return nil
}

// worker builds the simulator's configuration from the flags: the frontend, block cache and event
// publisher (nil without prefix caching).
func worker(f *flags, nc *nats.Conn, logger *zap.Logger) (*sim.Config, *sim.Publisher, error) {
	if f.prefillPerToken < 0 || f.maxRunning < 0 {
		return nil, nil, errors.New("-prefill-per-token and -max-running must be >= 0")
	}
	cfg := &sim.Config{WorkerID: f.workerID, Model: f.served, BlockSize: f.blockSize, PrefillDelay: f.prefill,
		TokenDelay: f.perToken, PrefillPerToken: f.prefillPerToken, MaxRunning: f.maxRunning, MaxTokens: f.maxTokens, Logger: logger,
		LoRAModules: f.loraModules,
		APIs:        apis.Options{Anthropic: apis.AnthropicOptions{InlineSystem: f.inlineSystem, DisabledThinkingEffort: f.disabledEffort}}}
	if f.features != "" {
		cfg.Features = strings.Split(f.features, ",")
	}
	dir := f.model
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		switch {
		case f.modelSet && dir != sim.DefaultModelDir:
			logger.Warn("-model is not a directory: taken as the served model name", zap.String("model", dir))
			cfg.Model, dir = dir, sim.DefaultModelDir
			if st, err := os.Stat(dir); err != nil || !st.IsDir() {
				logger.Warn("default model folder missing: counting words, no prefix cache", zap.String("dir", dir))
				return cfg, nil, nil
			}
		case !f.modelSet:
			logger.Warn("default model folder missing: counting words, no prefix cache", zap.String("dir", dir))
			return cfg, nil, nil
		default:
			return nil, nil, fmt.Errorf("loading model folder %s: not a directory", dir)
		}
	}
	bc := &sim.BlockCacheConfig{BlockSize: f.blockSize, Capacity: f.cacheBlocks}
	switch f.extraKeys {
	case "pair":
		bc.KeyStyle = codec.PairKeys
	case "bare":
		bc.KeyStyle = codec.BareKeys
	default:
		return nil, nil, fmt.Errorf("-extra-keys %q: want pair or bare", f.extraKeys)
	}
	pc := &sim.PublisherConfig{WorkerID: f.workerID, Conn: nc, RingBatches: f.replayBatches, RingBytes: f.replayBytes, Hybrid: f.hybrid, MaxBlocks: f.cacheBlocks, Logger: logger}
	switch f.encoding {
	case "map":
		pc.EventForm = codec.MapForm
	case "array":
		pc.EventForm = codec.ArrayForm
	default:
		return nil, nil, fmt.Errorf("-encoding %q: want map or array", f.encoding)
	}
	fc := &sim.FrontendConfig{ModelDir: dir, Codecs: strings.Split(f.codecs, ",")}
	if _, err := mediaport.ParseCodecs(fc.Codecs); err != nil {
		return nil, nil, fmt.Errorf("-codecs: %w", err)
	}
	if f.contract != "" {
		b, err := os.ReadFile(f.contract)
		if err != nil {
			return nil, nil, fmt.Errorf("reading contract: %w", err)
		}
		fc.Contract = b
	}
	if f.oracle != "" {
		b, err := os.ReadFile(f.oracle)
		if err != nil {
			return nil, nil, fmt.Errorf("reading oracle tokens: %w", err)
		}
		if err := json.Unmarshal(b, &fc.OracleTokens); err != nil {
			return nil, nil, fmt.Errorf("decoding oracle tokens %s: %w", f.oracle, err)
		}
		if fc.OracleTokens == nil {
			fc.OracleTokens = []uint32{}
		}
	}
	fetchCfg := fetch.DefaultConfig()
	fetchCfg.AllowLoopback, fetchCfg.AllowPrivate, fetchCfg.FileRoot = true, true, f.fileRoot
	fc.Fetch = fetchCfg
	fe, err := sim.NewFrontend(fc)
	if err != nil {
		return nil, nil, err
	}
	blocks, err := sim.NewBlockCache(bc)
	if err != nil {
		return nil, nil, err
	}
	pub, err := sim.NewPublisher(pc)
	if err != nil {
		return nil, nil, err
	}
	cfg.Frontend, cfg.Blocks, cfg.Events = fe, blocks, pub
	return cfg, pub, nil
}

// advertised returns the listen address as a dialable endpoint: an unspecified host becomes
// 127.0.0.1.
func advertised(a *net.TCPAddr) string {
	host := a.IP.String()
	if a.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, fmt.Sprint(a.Port))
}

// switchHandler serves through the handler set last (startingHandler, then the simulator's).
type switchHandler struct{ h atomic.Pointer[http.Handler] }

func (s *switchHandler) set(h http.Handler) { s.h.Store(&h) }

func (s *switchHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*s.h.Load()).ServeHTTP(w, r)
}

// startingHandler answers while the simulator waits for NATS to claim its worker id.
func startingHandler(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = io.WriteString(w, `{"error":{"code":"worker_starting","message":"kvroute-sim is waiting for NATS to claim its worker id; it serves once connected"}}`+"\n")
}
