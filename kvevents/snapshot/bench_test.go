package snapshot_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/kvroute/kvroute/kv"

	"github.com/nats-io/nats.go"

	"github.com/kvroute/kvroute/internal/testkit/kvhistory"
	"github.com/kvroute/kvroute/internal/testkit/memtest"
	"github.com/kvroute/kvroute/internal/testkit/natstest"
	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/kvevents/snapshot"
)

// chainsOf returns BlockStored events of n blocks in chains of 16 (block size 16, distinct random
// tokens, one identity in every fourth block's extra_keys), as a busy worker's prefix cache holds them.
func chainsOf(n int) []codec.Event {
	var evs []codec.Event
	var h uint64 = 1
	tok := uint32(1)
	for left := n; left > 0; {
		k := min(16, left)
		ev := codec.Event{Type: codec.BlockStored, BlockSize: kvhistory.BlockSize, HasExtraKeys: true}
		for b := range k {
			h++
			ev.BlockHashes = append(ev.BlockHashes, kv.EngineHash(h*0x9e3779b97f4a7c15|1))
			for range kvhistory.BlockSize {
				tok = tok*1103515245 + 12345
				ev.TokenIDs = append(ev.TokenIDs, tok%150000)
			}
			var keys []codec.ExtraKey
			if b%4 == 3 {
				keys = []codec.ExtraKey{{Kind: codec.KeyPair, Str: kv.Identity(h).UUID(), Offset: 0}}
			}
			ev.ExtraKeys = append(ev.ExtraKeys, keys)
		}
		evs = append(evs, ev)
		left -= k
	}
	return evs
}

func setOf(n int) *snapshot.Set {
	s := snapshot.NewSet(n)
	s.Reset(true)
	s.Apply(&codec.Batch{Events: chainsOf(n)})
	return s
}

// BenchmarkSetMemory reports the live heap per block of a Set of 100 000 blocks of 16 tokens (the
// bridge's cost per block its engine holds), measured after runtime.GC.
func BenchmarkSetMemory(b *testing.B) {
	const n = 100_000
	evs := chainsOf(n)
	b.ResetTimer()
	var per float64
	for range b.N {
		before := memtest.LiveHeap()
		s := snapshot.NewSet(n)
		s.Apply(&codec.Batch{Events: evs})
		after := memtest.LiveHeap()
		per = float64(after-before) / n
		runtime.KeepAlive(s)
	}
	b.ReportMetric(per, "B/block")
}

// TestSetMemoryBounded: the live heap of a Set bounded to 20 000 blocks is the same after 20 000 and
// after 100 000 stored blocks (the oldest go), and at most 400 bytes per block of 16 tokens.
func TestSetMemoryBounded(t *testing.T) {
	const limit = 20_000
	measure := func(stored int) float64 {
		evs := chainsOf(stored)
		before := memtest.LiveHeap()
		s := snapshot.NewSet(limit)
		for i := range evs {
			s.Apply(&codec.Batch{Events: evs[i : i+1]})
		}
		after := memtest.LiveHeap()
		if s.Len() != min(stored, limit) {
			t.Fatalf("set holds %d blocks after %d stored, want %d", s.Len(), stored, min(stored, limit))
		}
		runtime.KeepAlive(s)
		runtime.KeepAlive(evs)
		return float64(after-before) / float64(s.Len())
	}
	small, large := measure(limit), measure(5*limit)
	t.Logf("live heap per block: %.0f B after %d blocks stored, %.0f B after %d", small, limit, large, 5*limit)
	if large > 1.5*small || large > 400 {
		t.Errorf("live heap per held block %.0f B after %d stored vs %.0f B after %d: want about equal (map slack) and <= 400 B", large, 5*limit, small, limit)
	}
}

// BenchmarkSetApply reports the bridge's cost of keeping the set: one stored event of 16 blocks
// applied (decoded events in, as the bridge decodes the batch it forwards).
func BenchmarkSetApply(b *testing.B) {
	evs := chainsOf(1 << 16)
	s := snapshot.NewSet(1 << 15) // bounded: the steady state evicts as it stores
	b.ResetTimer()
	for i := range b.N {
		s.Apply(&codec.Batch{Events: evs[i%len(evs) : i%len(evs)+1]})
	}
	b.ReportMetric(16, "blocks/op")
}

// BenchmarkSnapshot1M times a snapshot of 1 Mi blocks of 16 tokens: the publisher's walk and
// encoding (order+encode), the router's decode, normalize and index store of the chunks (apply), and
// the whole request over an embedded NATS server on loopback (nats: respond, fetch, apply).
func BenchmarkSnapshot1M(b *testing.B) {
	const n = 1 << 20
	s := setOf(n)
	b.Run("order", func(b *testing.B) { // the publisher's forwarding pauses for this part only
		for range b.N {
			if v := s.Order(); len(v.Blocks) != n {
				b.Fatalf("order has %d blocks, want %d", len(v.Blocks), n)
			}
		}
	})
	b.Run("order+encode", func(b *testing.B) {
		var bytes int
		for range b.N {
			bytes = 0
			if err := snapshot.Encode(s.Order(), 0, func(p []byte, _ int) error { bytes += len(p); return nil }); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(bytes)/n, "B/block")
	})
	var chunks [][]byte
	if err := snapshot.Encode(s.Order(), 0, func(p []byte, _ int) error { chunks = append(chunks, p); return nil }); err != nil {
		b.Fatal(err)
	}
	b.Run("apply", func(b *testing.B) {
		for range b.N {
			ix, _ := index.New(nil)
			a := kvhistory.NewApplier(b, ix, "w")
			for _, p := range chunks {
				a.Apply(p)
			}
			if got := ix.WorkerBlocks(index.WorkerKey{ID: "w"}); got != n {
				b.Fatalf("index holds %d blocks, want %d", got, n)
			}
		}
	})
	chunks = nil
	b.Run("nats", func(b *testing.B) {
		srv := natstest.Start(b)
		pub, _ := nats.Connect(srv.ClientURL())
		defer pub.Close()
		rc, _ := nats.Connect(srv.ClientURL())
		defer rc.Close()
		sub, _ := pub.Subscribe("kvroute.ctl.w.snapshot", func(m *nats.Msg) {
			a := snapshot.Answer{View: s.Order(), Seq: 1, Complete: true, Encoding: codec.VLLM}
			if err := snapshot.Respond(pub, m.Reply, &a); err != nil {
				b.Error(err)
			}
		})
		defer func() { _ = sub.Unsubscribe() }()
		_ = pub.Flush()
		b.ResetTimer()
		for range b.N {
			ix, _ := index.New(nil)
			a := kvhistory.NewApplier(b, ix, "w")
			err := snapshot.Fetch(context.Background(), rc, "kvroute.ctl.w.snapshot", 0, snapshot.FetchConfig{Idle: 30 * time.Second},
				func(c snapshot.Chunk) error { a.Apply(c.Payload); return nil })
			if err != nil {
				b.Fatal(err)
			}
			if got := ix.WorkerBlocks(index.WorkerKey{ID: "w"}); got != n {
				b.Fatal(fmt.Sprintf("index holds %d blocks, want %d", got, n))
			}
		}
	})
}
