package bridge_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/testkit/kvhistory"
	"github.com/kvroute/kvroute/internal/testkit/wait"
	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/kvevents/registry"
	"github.com/kvroute/kvroute/kvevents/subscriber"
)

// TestSnapshotForLateRouter: a router that starts after the bridge's ring wrapped (and the engine has
// no replay socket) gets each rank's block set from the bridge's snapshot and ends with the index of
// a router that applied every batch, block for block; the live batches after it continue from the
// snapshot's seq.
func TestSnapshotForLateRouter(t *testing.T) {
	env := newEnv(t)
	pubPort := freeTCPPair(t)
	engines := []*fakeEngine{
		startEngine(t, env.zctx, tcpEP(pubPort), "", true),
		startEngine(t, env.zctx, tcpEP(pubPort+1), "", true),
	}
	cfg := oneWorker(pubPort, 0)
	cfg.Workers[0].DPSize = 2
	cfg.RingBatches = 10
	cfg.DisableRegistration = true
	b := env.startBridge(cfg)
	for _, e := range engines {
		e.waitSubscribed()
	}
	hist := []*kvhistory.History{kvhistory.New(21), kvhistory.New(22)}
	var all [2][][]byte
	send := func(n int) {
		for range n {
			for dp, e := range engines {
				p := kvhistory.Encode(t, hist[dp].Batch())
				all[dp] = append(all[dp], p)
				e.publish(p, false)
			}
		}
	}
	waitForwarded := func(last uint64) {
		t.Helper()
		wait.For(t, fmt.Sprintf("bridge forwarded up to seq %d", last), func() bool {
			return rankStats(b, 0).LastSeq == last && rankStats(b, 1).LastSeq == last
		})
	}
	send(300)
	waitForwarded(299)

	idx, err := index.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := subscriber.New(&subscriber.Config{ReplayTimeout: 5 * time.Second}, env.rc, idx)
	if err != nil {
		t.Fatal(err)
	}
	sub.SetWorkers([]registry.Worker{{WorkerID: "w1", Endpoint: "127.0.0.1:8000", Model: "m", Engine: "vllm", BlockSize: 16, DPSize: 2}})
	if err := sub.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer sub.Stop()
	waitApplied := func(last uint64) {
		t.Helper()
		wait.For(t, fmt.Sprintf("router at seq %d", last), func() bool {
			ws, ok := sub.Worker("w1")
			if !ok {
				return false
			}
			for _, r := range ws.Ranks {
				if r.LastSeq == nil || *r.LastSeq != last || r.State != subscriber.StateLive {
					return false
				}
			}
			return true
		})
	}
	check := func() {
		t.Helper()
		for dp := range 2 {
			ref, err := index.New(nil)
			if err != nil {
				t.Fatal(err)
			}
			a := kvhistory.NewApplier(t, ref, "w1")
			for _, p := range all[dp] {
				a.Apply(p)
			}
			want := kvhistory.Dumped(ref, "w1")
			got := dumpRank(idx, dp)
			if len(want) < 100 || !slices.Equal(got, want) {
				t.Fatalf("rank %d: router holds %d entries, one that saw every batch %d", dp, len(got), len(want))
			}
		}
	}
	waitApplied(299)
	check()
	send(20)
	waitApplied(319)
	check()
	for dp := range 2 {
		if s := rankStats(b, dp); s.Snapshots != 1 || s.SnapshotErrors != 0 || s.SetBlocks == 0 || s.ReplayErrors != 1 {
			t.Errorf("rank %d bridge stats %+v: want one failed replay, one snapshot", dp, s)
		}
	}
	if st := sub.Stats(); st.Events[subscriber.ResultSnapshotLoaded] != 2 || st.Events[subscriber.ResultCleared] != 0 {
		t.Errorf("router events %v: want a snapshot per rank, nothing cleared", st.Events)
	}
}

// dumpRank is kvhistory.Dumped for rank dp of w1.
func dumpRank(idx *index.Index, dp int) []index.StoredBlock {
	return kvhistory.DumpedKey(idx, index.WorkerKey{ID: "w1", DPRank: dp})
}
