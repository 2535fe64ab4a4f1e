package main

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvroute/kvroute/kvevents/registry"

	"go.uber.org/zap"

	"github.com/kvroute/kvroute/internal/sim"
	"github.com/kvroute/kvroute/internal/testkit/natstest"
	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/routing/layout"
	"github.com/nats-io/nats.go"
)

func TestWorkerFromFlags(t *testing.T) {
	dir := t.TempDir()
	contract := filepath.Join(dir, "contract.json")
	oracle := filepath.Join(dir, "oracle.json")
	if err := os.WriteFile(contract, []byte(sim.HubContract), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(oracle, []byte(`[151644, 872, 198, 9707, 151645]`), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := parseFlags([]string{"-model", "../../testdata/golden/qwen3vl-test-model", "-served-model-name", "qwen",
		"-contract", contract, "-oracle-tokens", oracle, "-encoding", "array", "-extra-keys", "bare",
		"-cache-blocks", "7", "-block-size", "32", "-features", "a,b",
		"-prefill-per-token", "100us", "-max-running", "3", "-token-delay", "5ms"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, pub, err := worker(f, nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	bc := cfg.Blocks.Config()
	if cfg.Frontend == nil || cfg.Model != "qwen" || bc.Capacity != 7 || bc.BlockSize != 32 || bc.KeyStyle != codec.BareKeys ||
		len(cfg.Features) != 2 || cfg.Events != pub || len(cfg.Frontend.ContractJSON()) == 0 ||
		cfg.PrefillPerToken != 100*time.Microsecond || cfg.MaxRunning != 3 || cfg.TokenDelay != 5*time.Millisecond {
		t.Fatalf("config %+v blocks %+v", cfg, bc)
	}
	s := sim.New(cfg)
	if s.Config().BlockSize != 32 || string(s.Config().Contract) != sim.HubContract {
		t.Fatalf("server config %+v", s.Config())
	}
}

// TestServedNameCompat keeps the first version's meaning of -model (a served name); without the
// default model folder (tests run in cmd/kvroute-sim) the simulator counts words.
func TestServedNameCompat(t *testing.T) {
	f, err := parseFlags([]string{"-model", "kvroute-x"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, pub, err := worker(f, nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Model != "kvroute-x" || cfg.Frontend != nil || pub != nil {
		t.Fatalf("config %+v", cfg)
	}
	for _, args := range [][]string{{"-model", "../../testdata/golden/qwen3vl-test-model", "-encoding", "json"},
		{"-model", "../../testdata/golden/qwen3vl-test-model", "-extra-keys", "triple"},
		{"-max-running", "-1"}, {"-prefill-per-token", "-1ms"}} {
		f, err := parseFlags(args)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := worker(f, nil, zap.NewNop()); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

// TestNemotronWorkerFromFlags: -model with the Nemotron test folder and no -contract gives a
// simulated Nemotron worker publishing the nemotron_omni contract; -contract with EVS is taken.
func TestNemotronWorkerFromFlags(t *testing.T) {
	f, err := parseFlags([]string{"-model", "../../testdata/nemotron-test-model", "-served-model-name", "nemotron"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, err := worker(f, nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Frontend == nil || string(cfg.Frontend.ContractJSON()) != layout.NemotronContractJSON {
		t.Fatalf("contract %s", cfg.Frontend.ContractJSON())
	}
	path := filepath.Join(t.TempDir(), "evs.json")
	evs := strings.Replace(layout.NemotronContractJSON, `"video_pruning_rate": 0.0`, `"video_pruning_rate": 0.7`, 1)
	if err := os.WriteFile(path, []byte(evs), 0o600); err != nil {
		t.Fatal(err)
	}
	if f, err = parseFlags([]string{"-model", "../../testdata/nemotron-test-model", "-contract", path}); err != nil {
		t.Fatal(err)
	}
	if cfg, _, err = worker(f, nil, zap.NewNop()); err != nil {
		t.Fatal(err)
	}
	if r := cfg.Frontend.Contract().PruningRate(); r != 0.7 {
		t.Fatalf("pruning rate %v", r)
	}
	// A Qwen contract does not fit the Nemotron folder: refused at start.
	qwen := filepath.Join(t.TempDir(), "qwen.json")
	if err := os.WriteFile(qwen, []byte(sim.HubContract), 0o600); err != nil {
		t.Fatal(err)
	}
	if f, err = parseFlags([]string{"-model", "../../testdata/nemotron-test-model", "-contract", qwen}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := worker(f, nil, zap.NewNop()); err == nil {
		t.Fatal("a qwen3_vl contract on the Nemotron folder started")
	}
}

// TestHybridFlag: -hybrid makes the attention group's block size 1056 unless -block-size is given.
func TestHybridFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"-hybrid"}, 1056},
		{[]string{"-hybrid", "-block-size", "528"}, 528},
		{nil, 16},
	} {
		f, err := parseFlags(append([]string{"-model", "../../testdata/golden/qwen3vl-test-model"}, tc.args...))
		if err != nil {
			t.Fatal(err)
		}
		cfg, pub, err := worker(f, nil, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		_ = pub.Close()
		if cfg.BlockSize != tc.want || cfg.Blocks.Config().BlockSize != tc.want || f.hybrid != (len(tc.args) > 0) {
			t.Errorf("%v: block size %d/%d, want %d", tc.args, cfg.BlockSize, cfg.Blocks.Config().BlockSize, tc.want)
		}
	}
}

// TestBusyPortAnnouncesNothing: a simulator that cannot bind its port exits without sending its
// worker's reset. Before the fix the publisher (created first) sent `reset` for the worker id, so
// a second simulator started by mistake wiped the running worker's blocks from every router.
func TestBusyPortAnnouncesNothing(t *testing.T) {
	ns := natstest.Start(t)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	resets, err := nc.SubscribeSync(wire.ResetSubject("sim-busy"))
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	err = run([]string{"-listen", busy.Addr().String(), "-worker-id", "sim-busy", "-nats", ns.ClientURL(),
		"-model", "../../testdata/golden/qwen3vl-test-model", "-served-model-name", "qwen"})
	if err == nil || !strings.Contains(err.Error(), "listening on") {
		t.Fatalf("run on a busy port: %v, want a listen error", err)
	}
	if m, err := resets.NextMsg(300 * time.Millisecond); err == nil {
		t.Fatalf("a simulator that did not start sent %s on %s", m.Data, m.Subject)
	}
}

// TestDuplicateWorkerIDRefused: a simulator started with the -worker-id of a running one (its
// record heartbeats) refuses to start, and announces nothing: before, it overwrote the running
// worker's record (the endpoint flipped at every heartbeat) and its start-up reset emptied the
// running worker's blocks on every router (operator test).
func TestDuplicateWorkerIDRefused(t *testing.T) {
	ns := natstest.Start(t)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	kv := natstest.Bucket(t, nc)
	running, err := registry.NewPublisher(kv, registry.Worker{WorkerID: "sim-dup", Endpoint: "127.0.0.1:9", Model: "qwen", Engine: "vllm", BlockSize: 16},
		&registry.PublisherConfig{Interval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := running.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = running.Stop(context.Background()) }()
	resets, err := nc.SubscribeSync(wire.ResetSubject("sim-dup"))
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	err = run([]string{"-listen", "127.0.0.1:0", "-worker-id", "sim-dup", "-nats", ns.ClientURL(),
		"-model", "../../testdata/golden/qwen3vl-test-model", "-served-model-name", "qwen"})
	if !errors.Is(err, registry.ErrWorkerIDInUse) || !strings.Contains(err.Error(), "127.0.0.1:9") {
		t.Fatalf("run with a running worker's id: %v, want ErrWorkerIDInUse naming its endpoint", err)
	}
	if m, err := resets.NextMsg(300 * time.Millisecond); err == nil {
		t.Fatalf("the refused simulator sent %s on %s", m.Data, m.Subject)
	}
	e, err := kv.Get(context.Background(), "sim-dup")
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := registry.Decode("sim-dup", e.Value()); err != nil || rec.Endpoint != "127.0.0.1:9" {
		t.Fatalf("the running worker's record: %+v, %v", rec, err)
	}
}

// TestBadNATSURLFlag: a -nats list nats.go could never dial is refused before the simulator binds
// its port, naming the flag (operator test: the message did not say which flag).
func TestBadNATSURLFlag(t *testing.T) {
	want := "-nats: entry 1 (nats://127.0.0.1:0): port 0, want 1-65535"
	if _, err := parseFlags([]string{"-nats", "nats://127.0.0.1:0"}); err == nil || err.Error() != want {
		t.Errorf("parseFlags(-nats nats://127.0.0.1:0) = %v, want %q", err, want)
	}
}
