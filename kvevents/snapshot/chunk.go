package snapshot

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/kvevents/wire"
)

// DefaultMaxChunkBytes is the default chunk payload bound: a quarter of NATS's default max_payload.
const DefaultMaxChunkBytes = 256 << 10

// Request is the body of a request on kvroute.ctl.<worker_id>.snapshot.
type Request struct {
	DPRank int `json:"dp_rank"`
}

// MaxRequestBytes bounds a request body.
const MaxRequestBytes = 4 << 10

// ErrSnapshot is wrapped by every error of Fetch about a snapshot that cannot be loaded.
var ErrSnapshot = errors.New("snapshot unavailable")

// Chunk is one received chunk.
type Chunk struct {
	// Seq is the snapshot's sequence number: live batches continue at Seq.
	Seq uint64
	// Index is the chunk's position (0, 1, …); Last marks the final chunk, which carries Blocks, the
	// block count of the whole snapshot.
	Index  int
	Last   bool
	Blocks int
	// Complete: the publisher's set starts at the engine's first batch or at an AllBlocksCleared.
	Complete bool
	Encoding codec.Encoding
	DPRank   int
	// Payload is one vLLM KVEventBatch of BlockStored events.
	Payload []byte
}

// estimate is an upper bound of a block's encoded bytes in an event (hash 9, tokens up to 5 each,
// extra keys as written).
func estimate(b *Block) int {
	n := 9 + 5*len(b.Tokens) + 2
	for _, k := range b.Keys {
		n += 12 + len(k.Str) + len(k.Raw)
	}
	return n
}

// Encode writes a view (Set.Order) as chunk payloads of about maxChunkBytes each
// (DefaultMaxChunkBytes when <= 0) and hands each to emit with the number of blocks it stores:
// first the blocks, consecutive blocks of one chain and one kind in one BlockStored event as the
// engine published them, then one BlockRemoved per KV cache group for the placeholders. It stops at
// the first error of emit. An empty view gives one empty batch, so a snapshot always has a chunk.
func Encode(v View, maxChunkBytes int, emit func(payload []byte, nblocks int) error) error {
	if maxChunkBytes <= 0 {
		maxChunkBytes = DefaultMaxChunkBytes
	}
	var (
		batch  codec.Batch
		size   int
		counts int
		sent   bool
	)
	flush := func() error {
		p, err := codec.EncodeVLLM(&batch, codec.ArrayForm, codec.MapForm)
		if err != nil {
			return fmt.Errorf("encoding snapshot chunk: %w", err)
		}
		if err := emit(p, counts); err != nil {
			return err
		}
		batch.Events, size, counts, sent = batch.Events[:0], 0, 0, true
		return nil
	}
	var last *Block
	for _, b := range v.Blocks {
		n := estimate(b)
		if size > 0 && size+n > maxChunkBytes {
			if err := flush(); err != nil {
				return err
			}
			last = nil
		}
		var ev *codec.Event
		if k := len(batch.Events); k > 0 && last != nil && b.HasParent && b.Parent == last.Hash && b.m == last.m && b.HasKeys == last.HasKeys {
			ev = &batch.Events[k-1]
		} else {
			m := b.m
			batch.Events = append(batch.Events, codec.Event{
				Type: codec.BlockStored, Parent: b.Parent, HasParent: b.HasParent, BlockSize: m.blockSize,
				LoRAID: m.loraID, HasLoRAID: m.hasLoRAID, Medium: m.medium, HasMedium: m.hasMedium,
				LoRAName: m.loraName, HasLoRAName: m.hasLoRAName, GroupIdx: m.groupIdx, HasGroupIdx: m.hasGroupIdx,
				SpecKind: m.specKind, HasSpecKind: m.hasSpecKind, HasExtraKeys: b.HasKeys,
			})
			ev = &batch.Events[len(batch.Events)-1]
			size += 64 + len(m.medium) + len(m.loraName) + len(m.specKind)
		}
		ev.BlockHashes = append(ev.BlockHashes, b.Hash)
		ev.TokenIDs = append(ev.TokenIDs, b.Tokens...)
		if b.HasKeys {
			ev.ExtraKeys = append(ev.ExtraKeys, b.Keys)
		}
		size += n
		counts++
		last = b
	}
	// Placeholders go after every block: one removal event per group.
	var byGroup []*codec.Event
	for _, b := range v.Removed {
		if size > 0 && size+10 > maxChunkBytes {
			if err := flush(); err != nil {
				return err
			}
			byGroup = byGroup[:0]
		}
		var ev *codec.Event
		for _, e := range byGroup {
			if e.GroupIdx == b.m.groupIdx && e.HasGroupIdx == b.m.hasGroupIdx {
				ev = e
			}
		}
		if ev == nil {
			batch.Events = append(batch.Events, codec.Event{Type: codec.BlockRemoved, GroupIdx: b.m.groupIdx, HasGroupIdx: b.m.hasGroupIdx})
			byGroup = byGroup[:0] // the append may have moved the events
			for i := range batch.Events {
				if batch.Events[i].Type == codec.BlockRemoved {
					byGroup = append(byGroup, &batch.Events[i])
				}
			}
			ev = byGroup[len(byGroup)-1]
		}
		ev.BlockHashes = append(ev.BlockHashes, b.Hash)
		size += 10
	}
	if size > 0 || !sent {
		return flush()
	}
	return nil
}

// chunkHeaders returns the headers of chunk i.
func chunkHeaders(seq uint64, i int, last bool, blocks int, complete bool, enc codec.Encoding, dpRank int) map[string][]string {
	h := map[string][]string{
		wire.HeaderSnapshotSeq:   {strconv.FormatUint(seq, 10)},
		wire.HeaderSnapshotChunk: {strconv.Itoa(i)},
		wire.HeaderEncoding:      {string(enc)},
		wire.HeaderDPRank:        {strconv.Itoa(dpRank)},
	}
	if complete {
		h[wire.HeaderSnapshotComplete] = []string{"1"}
	}
	if last {
		h[wire.HeaderSnapshotLast] = []string{"1"}
		h[wire.HeaderSnapshotBlocks] = []string{strconv.Itoa(blocks)}
	}
	return h
}

// parseChunk reads a chunk's headers; get returns a header's value.
func parseChunk(get func(string) string, payload []byte) (Chunk, error) {
	if e := get(wire.HeaderSnapshotError); e != "" {
		return Chunk{}, fmt.Errorf("%w: publisher: %s", ErrSnapshot, e)
	}
	c := Chunk{Payload: payload, Last: get(wire.HeaderSnapshotLast) == "1", Complete: get(wire.HeaderSnapshotComplete) == "1"}
	var err error
	if c.Seq, err = strconv.ParseUint(get(wire.HeaderSnapshotSeq), 10, 64); err != nil {
		return Chunk{}, fmt.Errorf("%w: chunk without a valid %s", ErrSnapshot, wire.HeaderSnapshotSeq)
	}
	if c.Index, err = strconv.Atoi(get(wire.HeaderSnapshotChunk)); err != nil || c.Index < 0 {
		return Chunk{}, fmt.Errorf("%w: chunk without a valid %s", ErrSnapshot, wire.HeaderSnapshotChunk)
	}
	if c.DPRank, err = strconv.Atoi(get(wire.HeaderDPRank)); err != nil || c.DPRank < 0 {
		return Chunk{}, fmt.Errorf("%w: chunk without a valid %s", ErrSnapshot, wire.HeaderDPRank)
	}
	enc, err := codec.ParseEncoding(get(wire.HeaderEncoding))
	if err != nil || (enc != codec.VLLM && enc != codec.SGLang) {
		return Chunk{}, fmt.Errorf("%w: chunk %s %q is not vllm or sglang", ErrSnapshot, wire.HeaderEncoding, get(wire.HeaderEncoding))
	}
	c.Encoding = enc
	if c.Last {
		if c.Blocks, err = strconv.Atoi(get(wire.HeaderSnapshotBlocks)); err != nil || c.Blocks < 0 {
			return Chunk{}, fmt.Errorf("%w: last chunk without a valid %s", ErrSnapshot, wire.HeaderSnapshotBlocks)
		}
	}
	return c, nil
}
