package integration

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/testkit/natstest"
	"github.com/kvroute/kvroute/kvevents/registry"
)

// TestRegistryEndpointAllowList: a registry record whose endpoint is outside upstream_cidrs
// (default: loopback and private ranges) is refused and logged; one inside is listed (issue 11
// item 4). Only the accepted record's join is logged.
func TestRegistryEndpointAllowList(t *testing.T) {
	live := newFakeWorker(t, "inside")
	e := startEdge(t, edgeConfig{})
	kv := natstest.Bucket(t, runningApp(t).NATS().Conn())
	for _, w := range []registry.Worker{
		{WorkerID: "outside", Endpoint: "203.0.113.5:8000", Model: "qwen", Engine: "vllm", BlockSize: 16},
		{WorkerID: "inside", Endpoint: live.addr(), Model: "qwen", Engine: "vllm", BlockSize: 16},
	} {
		pub, err := registry.NewPublisher(kv, w, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := pub.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = pub.Stop(context.Background()) })
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ws := runningApp(t).WorkerList()
		if len(ws) == 1 && ws[0].WorkerID == "inside" {
			break
		}
		if len(ws) > 1 || time.Now().After(deadline) {
			t.Fatalf("workers %+v, want only the record inside upstream_cidrs", ws)
		}
		time.Sleep(10 * time.Millisecond)
	}
	log, _ := os.ReadFile(e.caddyLog)
	if !bytes.Contains(log, []byte(`"msg":"refusing worker record: endpoint outside upstream_cidrs","worker_id":"outside","endpoint":"203.0.113.5:8000"`)) {
		t.Errorf("no refusal logged in %s", e.caddyLog)
	}
	// the join is logged for the accepted record only: an operator must not read "worker
	// registered" for a worker that is never routed to
	if !bytes.Contains(log, []byte(`"msg":"worker registered","worker_id":"inside"`)) {
		t.Errorf("join of the accepted record not logged in %s", e.caddyLog)
	}
	if bytes.Contains(log, []byte(`"msg":"worker registered","worker_id":"outside"`)) {
		t.Errorf("the refused record was logged as registered in %s", e.caddyLog)
	}
}
