// Command kvroute-sim is an OpenAI-compatible stand-in for a vLLM worker (DESIGN.md §11): it
// serves /v1/chat/completions (JSON, or SSE with "stream": true), /v1/models and /health with a
// configurable prefill and per-token latency, and registers itself in the kvroute worker registry
// (heartbeat every 10 s, record deleted on shutdown) when a NATS URL is given.
//
// Usage:
//
//	kvroute-sim -listen 127.0.0.1:8001 -worker-id sim-1 -model kvroute-sim \
//	    -nats nats://127.0.0.1:4222 -prefill-delay 50ms -token-delay 10ms
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/kvroute/kvroute/cmd/kvroute-sim/sim"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "kvroute-sim:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("kvroute-sim", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8001", "listen address (host:port)")
	advertise := fs.String("advertise", "", "endpoint published in the registry (default: the listen address)")
	workerID := fs.String("worker-id", "sim-1", "worker id ([A-Za-z0-9_-]{1,64})")
	model := fs.String("model", "kvroute-sim", "served model name")
	blockSize := fs.Int("block-size", 16, "KV block size in tokens")
	natsURL := fs.String("nats", "", "NATS URL for the worker registry (empty: do not register)")
	prefill := fs.Duration("prefill-delay", 0, "delay before the first token")
	perToken := fs.Duration("token-delay", 0, "delay before each further token")
	maxTokens := fs.Int("max-tokens", 8, "completion tokens when the request sets none")
	if err := fs.Parse(args); err != nil {
		return err
	}
	logger, err := zap.NewProduction()
	if err != nil {
		return fmt.Errorf("creating logger: %w", err)
	}
	defer func() { _ = logger.Sync() }()
	logger = logger.With(zap.String("worker_id", *workerID))

	s := sim.New(&sim.Config{WorkerID: *workerID, Model: *model, BlockSize: *blockSize,
		PrefillDelay: *prefill, TokenDelay: *perToken, MaxTokens: *maxTokens})
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", *listen, err)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	logger.Info("kvroute-sim listening", zap.String("addr", ln.Addr().String()), zap.String("model", *model))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var reg *sim.Registration
	if *natsURL != "" {
		ep := *advertise
		if ep == "" {
			ep = advertised(ln.Addr().(*net.TCPAddr))
		}
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		reg, err = sim.Register(rctx, *natsURL, ep, s, logger)
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

// advertised returns the listen address as a dialable endpoint: an unspecified host becomes
// 127.0.0.1.
func advertised(a *net.TCPAddr) string {
	host := a.IP.String()
	if a.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, fmt.Sprint(a.Port))
}
