package subscriber_test

import (
	"testing"

	"github.com/kvroute/kvroute/internal/testkit/wait"
	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/kvevents/registry"
	"github.com/kvroute/kvroute/kvevents/subscriber"
)

// TestBlockSizeCorrectedByReRegistration: a hybrid worker registered with a block size its events do
// not use (a bridge that read 16 from cache_config_info) has its attention group's stores counted as
// block_size_mismatch and indexed nowhere; once the record carries the events' block size (the bridge
// re-registers), the worker's registration replay brings the same batches back and they are indexed.
// The Mamba group's events are counted as non_attention_group both times.
func TestBlockSizeCorrectedByReRegistration(t *testing.T) {
	const bs = 1056
	e := newEnv(t, nil)
	b := newBridge(t, e.pub, "w")
	b.listen()
	rec := worker("w", 1)
	e.sub.SetWorkers([]registry.Worker{rec})
	e.waitState("w", subscriber.StateLive)

	toks := make([]uint32, 3*bs)
	for i := range toks {
		toks[i] = uint32(i % 9000)
	}
	full := codec.Event{Type: codec.BlockStored, BlockHashes: engineHashes(41, 42, 43), TokenIDs: toks, BlockSize: bs,
		Medium: "GPU", HasMedium: true, GroupIdx: 0, HasGroupIdx: true, SpecKind: "full_attention", HasSpecKind: true}
	mamba := codec.Event{Type: codec.BlockStored, BlockHashes: engineHashes(43), TokenIDs: toks, BlockSize: bs,
		Medium: "GPU", HasMedium: true, GroupIdx: 1, HasGroupIdx: true, SpecKind: "mamba", HasSpecKind: true}
	mambaRemoved := codec.Event{Type: codec.BlockRemoved, BlockHashes: engineHashes(42), Medium: "GPU", HasMedium: true, GroupIdx: 1, HasGroupIdx: true}
	b.forward(0, encode(t, codec.MapForm, full, mamba), false)
	b.forward(1, encode(t, codec.MapForm, mambaRemoved), false)
	e.waitSeq("w", 1)
	ev := e.events("w")
	if ev[subscriber.ResultBlockSizeMismatch] != 1 || ev[subscriber.ResultNonAttentionGroup] != 2 || ev[subscriber.ResultInvalidEvent] != 0 {
		t.Fatalf("counters with block size 16: %v", ev)
	}
	if n := e.ix.WorkerBlocks(index.WorkerKey{ID: "w"}); n != 0 {
		t.Fatalf("w holds %d blocks with a block size its events do not use", n)
	}

	rec.BlockSize = bs
	e.sub.SetWorkers([]registry.Worker{rec})
	wait.For(t, "the attention group's 3 blocks indexed after re-registration", func() bool {
		return e.ix.WorkerBlocks(index.WorkerKey{ID: "w"}) == 3
	})
	e.waitSeq("w", 1)
	ev = e.events("w") // counts since the worker was (last) registered
	if ev[subscriber.ResultBlockSizeMismatch] != 0 || ev[subscriber.ResultNonAttentionGroup] != 2 {
		t.Errorf("counters after re-registration: %v", ev)
	}
}
