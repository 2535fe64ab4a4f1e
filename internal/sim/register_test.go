package sim_test

import (
	"context"
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/sim"
	"github.com/kvroute/kvroute/internal/testkit/natstest"
	"github.com/kvroute/kvroute/kvevents/registry"
	"github.com/kvroute/kvroute/routing/layout"
)

// TestRegistryRecord registers a simulator over NATS: its record names engine vllm, its block size,
// its features and the contract it applies (the hub contract by default, same digest), and is
// deleted at Close.
func TestRegistryRecord(t *testing.T) {
	nc := startNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := sim.New(&sim.Config{WorkerID: "sim-r", Model: "qwen", Frontend: newFrontend(t, &fakeMedia{}, nil), Features: []string{"x_test"}})
	reg, err := sim.RegisterConn(ctx, nc, "127.0.0.1:8123", s, nil)
	if err != nil {
		t.Fatal(err)
	}
	kv := natstest.Bucket(t, nc)
	e, err := kv.Get(ctx, "sim-r")
	if err != nil {
		t.Fatal(err)
	}
	w, err := registry.Decode("sim-r", e.Value())
	if err != nil {
		t.Fatal(err)
	}
	if w.Engine != "vllm" || w.BlockSize != 16 || w.Model != "qwen" || w.Endpoint != "127.0.0.1:8123" || len(w.Features) != 1 || w.Features[0] != "x_test" {
		t.Fatalf("record %+v", w)
	}
	got, err := layout.ParseContract(w.Contract)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := layout.ParseContract([]byte(sim.HubContract))
	gd, _ := got.Digest()
	wd, _ := want.Digest()
	if gd != wd || gd == "" {
		t.Fatalf("contract digest %s, want %s", gd, wd)
	}
	if err := reg.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, "sim-r"); err == nil {
		t.Fatal("record still present after Close")
	}
}
