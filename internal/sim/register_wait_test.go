package sim_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/kvroute/kvroute/internal/natsutil"
	"github.com/kvroute/kvroute/internal/sim"
	"github.com/kvroute/kvroute/internal/testkit/natstest"
	"github.com/kvroute/kvroute/kvevents/registry"
)

// TestClaimAfterCrash: a simulator restarted with the id of a process that crashed (its record,
// with an instance, is still in the registry and no longer heartbeats) takes the id over after
// the claim window, in its first attempt and without a "registry not reachable" warning. Each
// attempt used to be cut at 5 s, shorter than the 15 s window: the restart waited for the record's
// 30 s TTL under that misleading warning (operator test).
func TestClaimAfterCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: waits out the registry's 15 s claim window")
	}
	nc := startNATS(t)
	kv := natstest.Bucket(t, nc)
	rec := registry.Worker{WorkerID: "crashed", Endpoint: "127.0.0.1:8124", Model: "qwen", Engine: "vllm", BlockSize: 16, Instance: "dead-process"}
	b, err := rec.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(context.Background(), "crashed", b); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.WarnLevel)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := sim.ClaimWorkerIDWait(ctx, nc, "crashed", zap.New(core)); err != nil {
		t.Fatalf("claim after a crash: %v", err)
	}
	for _, e := range logs.All() {
		t.Errorf("warning while taking over a crashed worker's id: %s %v", e.Message, e.ContextMap())
	}
}

// TestClaimNamesMissingJetStream: against a NATS server without JetStream the claim keeps
// waiting (NATS may be reconfigured), and its warning says JetStream is not enabled and how to
// enable it, instead of "no responders available for request" (operator test).
func TestClaimNamesMissingJetStream(t *testing.T) {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	core, logs := observer.New(zapcore.WarnLevel)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := sim.ClaimWorkerIDWait(ctx, nc, "w", zap.New(core)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("claim without JetStream: %v, want it to wait until ctx ends", err)
	}
	warned := logs.All()
	if len(warned) == 0 {
		t.Fatal("no warning")
	}
	if got, _ := warned[0].ContextMap()["error"].(string); !strings.Contains(got, natsutil.ErrJetStreamDisabled.Error()) {
		t.Fatalf("warning %q %q does not name the missing JetStream (%q)", warned[0].Message, got, natsutil.ErrJetStreamDisabled)
	}
}
