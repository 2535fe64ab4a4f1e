package sim_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/kvroute/kvroute/kv"

	"github.com/nats-io/nats.go"

	"github.com/kvroute/kvroute/internal/sim"
	"github.com/kvroute/kvroute/internal/testkit/natstest"
	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/kvevents/wire"
)

func startNATS(t *testing.T) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(natstest.Start(t).ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func nextMsg(t *testing.T, sub *nats.Subscription) *nats.Msg {
	t.Helper()
	m, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestPublishAndReplay announces a reset at start, publishes three batches over NATS (seq 0, 1, 2 with the DESIGN.md §2.2
// headers), then asks for a replay from seq 1 and gets the same two batches again with their seqs;
// with a ring of two batches, a replay from seq 0 is refused, and one past the newest replays
// nothing.
func TestPublishAndReplay(t *testing.T) {
	nc := startNATS(t)
	sub, err := nc.SubscribeSync(wire.EventsSubject("w-1"))
	if err != nil {
		t.Fatal(err)
	}
	resets, err := nc.SubscribeSync(wire.ResetSubject("w-1"))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := sim.NewPublisher(&sim.PublisherConfig{WorkerID: "w-1", Conn: nc, EventForm: codec.ArrayForm, RingBatches: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	if m := nextMsg(t, resets); string(m.Data) != `{"dp_rank":0,"next_seq":0,"reason":"simulator started"}` {
		t.Fatalf("reset %s", m.Data)
	}
	var sent [][]byte
	for i := range 3 {
		ev := codec.Event{Type: codec.BlockRemoved, BlockHashes: []kv.EngineHash{kv.EngineHash(i + 1), 1 << 63}, Medium: "GPU", HasMedium: true}
		seq, err := pub.Publish([]codec.Event{ev})
		if err != nil || seq != uint64(i) {
			t.Fatalf("publish %d: seq %d, %v", i, seq, err)
		}
	}
	for i := range 3 {
		m := nextMsg(t, sub)
		if m.Header.Get("Kvroute-Seq") != []string{"0", "1", "2"}[i] || m.Header.Get("Kvroute-Encoding") != "vllm" || m.Header.Get("Kvroute-Dp-Rank") != "0" {
			t.Fatalf("batch %d headers %v", i, m.Header)
		}
		b, err := codec.Decode(codec.VLLM, m.Data)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Events) != 1 || b.Events[0].Type != codec.BlockRemoved || b.Events[0].BlockHashes[0] != kv.EngineHash(i+1) || b.Events[0].BlockHashes[1] != 1<<63 || !b.HasDPRank || b.DPRank != 0 {
			t.Fatalf("batch %d decoded %+v", i, b)
		}
		sent = append(sent, m.Data)
	}

	ask := func(body string) map[string]any {
		t.Helper()
		r, err := nc.Request(wire.ReplaySubject("w-1"), []byte(body), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]any
		if err := json.Unmarshal(r.Data, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if r := ask(`{"dp_rank": 0, "from_seq": 1}`); r["replayed"] != 2.0 {
		t.Fatalf("replay from 1: %v", r)
	}
	for _, seq := range []int{1, 2} {
		m := nextMsg(t, sub)
		if m.Header.Get("Kvroute-Seq") != []string{"", "1", "2"}[seq] || !bytes.Equal(m.Data, sent[seq]) {
			t.Fatalf("replayed batch %d: seq %s", seq, m.Header.Get("Kvroute-Seq"))
		}
	}
	if r := ask(`{"dp_rank": 0, "from_seq": 0}`); r["error"] == nil {
		t.Errorf("replay from a dropped seq: %v", r)
	}
	if r := ask(`{"dp_rank": 0, "from_seq": 3}`); r["replayed"] != 0.0 {
		t.Errorf("replay past the newest: %v", r)
	}
	if r := ask(`{"dp_rank": 1, "from_seq": 0}`); r["error"] == nil {
		t.Errorf("replay of rank 1: %v", r)
	}
	if r := ask(`{`); r["error"] == nil {
		t.Errorf("bad request: %v", r)
	}
	if held := pub.Held(); len(held) != 2 || held[0].Seq != 1 {
		t.Errorf("held %+v", held)
	}
	if m, err := sub.NextMsg(50 * time.Millisecond); err == nil {
		t.Errorf("unexpected batch seq %s", m.Header.Get("Kvroute-Seq"))
	}
}
