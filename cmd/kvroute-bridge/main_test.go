package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/kvroute/kvroute/internal/natsutil"
	"github.com/kvroute/kvroute/internal/testkit/natstest"
	"github.com/kvroute/kvroute/kvevents/bridge"
	"github.com/kvroute/kvroute/kvevents/registry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func write(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseConfigFiles(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "contract.json", "{\n  \"schema\": \"kvroute.video_contract/v1\"\n}\n")
	a := write(t, dir, "a.json", `[
	  {"worker_id": "w1", "endpoint": "http://10.0.0.5:8000", "model": "m", "engine": "vllm", "block_size": 16,
	   "dp_size": 2, "zmq_endpoint": "tcp://10.0.0.5:5557", "replay_endpoint": "tcp://10.0.0.5:5558",
	   "topic": "kv-events", "features": ["mm_hashes"], "contract_file": "contract.json"},
	  {"worker_id": "w2", "endpoint": "10.0.0.6:30000", "model": "m", "engine": "sglang", "block_size": 64,
	   "zmq_endpoint": "tcp://10.0.0.6:5557"}]`)
	b := write(t, dir, "b.json", `{"worker_id": "w3", "endpoint": "10.0.0.7:8000", "model": "m", "engine": "vllm", "zmq_endpoint": "tcp://10.0.0.7:5557"}`)
	o, err := parseArgs([]string{"--config", a, "--config", b, "--nats-url", "nats://n:4222", "--ring-batches", "50"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.workers) != 3 || o.natsURL != "nats://n:4222" || o.cfg.RingBatches != 50 {
		t.Fatalf("options = %+v", o)
	}
	w1, w2, w3 := o.workers[0], o.workers[1], o.workers[2]
	if w1.WorkerID != "w1" || w1.Endpoint != "10.0.0.5:8000" || w1.DPSize != 2 || w1.Encoding != "vllm" ||
		string(w1.Contract) != `{"schema":"kvroute.video_contract/v1"}` || w1.MetricsURL != "http://10.0.0.5:8000/metrics" {
		t.Errorf("w1 = %+v", w1)
	}
	if w2.Engine != "sglang" || w2.Encoding != "sglang" || w2.DPSize != 1 || w2.BlockSize != 64 || len(w2.Contract) != 0 {
		t.Errorf("w2 = %+v", w2)
	}
	if w3.WorkerID != "w3" {
		t.Errorf("w3 = %+v", w3)
	}

	bad := map[string][]string{
		"config with flags":         {"--config", b, "--worker-id", "x"},
		"unknown field":             {"--config", write(t, dir, "u.json", `{"worker_id": "w", "bogus": 1}`)},
		"both contracts":            {"--config", write(t, dir, "c.json", `{"worker_id": "w", "contract": {}, "contract_file": "contract.json"}`)},
		"contract not json":         {"--worker-id", "w", "--endpoint", "h:1", "--model", "m", "--contract", write(t, dir, "x.json", "nope")},
		"bad dp endpoint":           {"--worker-id", "w", "--endpoint", "h:1", "--model", "m", "--dp-size", "2", "--zmq-endpoint", "ipc:///tmp/x"},
		"extra argument":            {"--worker-id", "w", "extra"},
		"sglang without block size": {"--worker-id", "w", "--endpoint", "h:1", "--model", "m", "--engine", "sglang"},
	}
	for name, args := range bad {
		if _, err := parseArgs(args, io.Discard); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// a NATS URL nats.go could never dial is a usage error naming the flag (operator test)
	want := "--nats-url: entry 2 (nats://b:99999): port 99999, want 1-65535"
	if _, err := parseArgs([]string{"--worker-id", "w", "--endpoint", "h:1", "--model", "m", "--nats-url", "nats://a:4222,nats://b:99999"}, io.Discard); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("bad NATS URL: err = %v, want %q", err, want)
	}
	if _, err := parseArgs([]string{"--worker-id", "w.1", "--endpoint", "h:1", "--model", "m"}, io.Discard); !errors.Is(err, bridge.ErrConfig) {
		t.Errorf("bad worker id: err = %v, want ErrConfig", err)
	}
}

// TestRunRegistersAndDeregisters runs the command against an embedded NATS server: the worker record
// appears, and cancelling the context (what SIGTERM does) deletes it and returns nil.
func TestRunRegistersAndDeregisters(t *testing.T) {
	srv := natstest.Start(t)
	nc, err := natsutil.Connect(srv.ClientURL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	kv := natstest.Bucket(t, nc)
	contract := write(t, t.TempDir(), "contract.json", `{"schema":"kvroute.video_contract/v1"}`)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--nats-url", srv.ClientURL(), "--worker-id", "w9", "--endpoint", "http://127.0.0.1:8000",
			"--model", "m", "--block-size", "32", "--features", "mm_hashes, x", "--contract", contract,
			"--zmq-endpoint", "tcp://127.0.0.1:1", "--log-level", "error"}, io.Discard)
	}()
	var rec registry.Worker
	deadline := time.Now().Add(30 * time.Second)
	for {
		if e, err := kv.Get(context.Background(), "w9"); err == nil {
			if rec, err = registry.Decode("w9", e.Value()); err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatal("no worker record")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if rec.BlockSize != 32 || rec.Endpoint != "127.0.0.1:8000" || len(rec.Features) != 2 || rec.Features[1] != "x" || string(rec.Contract) != `{"schema":"kvroute.video_contract/v1"}` {
		t.Errorf("record = %+v", rec)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run = %v", err)
	}
	if _, err := kv.Get(context.Background(), "w9"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("record after shutdown: err = %v, want ErrKeyNotFound", err)
	}
}
