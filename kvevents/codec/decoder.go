package codec

import (
	"bytes"
	"fmt"

	"github.com/kvroute/kvroute/kv"

	"github.com/vmihailenco/msgpack/v5"
)

// This file holds the Decoder: its reusable state, the entry points by encoding, and the per-batch
// scratch that decoded hashes and tokens live in until finish copies them out. The engine batch is
// read in batch.go, its events in vllm.go and vllm_values.go, the bytes by msgpack.go and skip.go.

// Decoder decodes batches with reusable state. A Decoder must not be used by two goroutines at once;
// make one per subscriber goroutine. It keeps scratch buffers between calls (reused, never aliased by a
// returned Batch) and a bounded set of recently decoded short strings (media identifiers, tiers, LoRA
// names), which returned Batches share: strings are immutable, so this is invisible to callers.
type Decoder struct {
	buf []byte
	off int // engine batches: read offset in buf
	r   bytes.Reader
	d   *msgpack.Decoder

	// Per-batch scratch: events' hashes and tokens point here while a batch is decoded, then are copied
	// into exactly sized per-batch slabs (finish), so the returned Batch owns its memory.
	hs   []kv.EngineHash
	toks []uint32

	one *[1]Event // the current batch's room for a single event (see batchBox)

	strs map[string]string // interned strings, at most maxInterned
	last string            // the last interned string (extra_keys repeat one identifier per block)
}

// batchBox allocates a Batch together with room for one event, the usual batch size.
type batchBox struct {
	b  Batch
	ev [1]Event
}

// Interning bounds: strings up to maxInternLen bytes, at most maxInterned of them (then forgotten at once).
const (
	maxInternLen = 128
	maxInterned  = 1024
)

// NewDecoder returns a Decoder.
func NewDecoder() *Decoder {
	dc := &Decoder{}
	dc.d = msgpack.NewDecoder(&dc.r)
	return dc
}

// Decode decodes one batch as published on kvroute.events.<id> in the given encoding. The error wraps
// ErrMalformed when b is not one well-formed batch (trailing bytes included); events of unknown types
// and events with wrongly shaped fields are skipped and counted in the Batch instead. The Batch does not
// alias b, nor the Decoder's scratch: it stays valid after later calls.
func (dc *Decoder) Decode(enc Encoding, b []byte) (*Batch, error) {
	switch enc {
	case VLLM, SGLang:
		bt, err := dc.decodeEngine(b)
		if err != nil {
			return nil, fmt.Errorf("decoding %s batch: %w", enc, err)
		}
		return bt, nil
	case DynamoJSON:
		return decodeDynamoJSON(b)
	case DynamoMsgpack:
		return dc.decodeDynamoMsgpack(b)
	}
	return nil, fmt.Errorf("decoding batch: unknown encoding %q", enc)
}

// Decode decodes one batch with a fresh Decoder (see Decoder.Decode).
func Decode(enc Encoding, b []byte) (*Batch, error) {
	return NewDecoder().Decode(enc, b)
}

// reset prepares the generic msgpack decoder (Dynamo msgpack batches).
func (dc *Decoder) reset(b []byte) {
	dc.buf = b
	dc.r.Reset(b)
	dc.d.Reset(&dc.r)
}

// intern returns b as a string, shared with earlier results when short and seen recently.
func (dc *Decoder) intern(b []byte) string {
	if string(b) == dc.last {
		return dc.last
	}
	if len(b) > maxInternLen {
		return string(b)
	}
	s, ok := dc.strs[string(b)]
	if !ok {
		if dc.strs == nil || len(dc.strs) >= maxInterned {
			dc.strs = make(map[string]string, 64)
		}
		s = string(b)
		dc.strs[s] = s
	}
	dc.last = s
	return s
}

// ensureScratch makes the scratch on first use (sized for a typical batch; it grows as needed).
func (dc *Decoder) ensureScratch() {
	if dc.hs == nil {
		dc.hs, dc.toks = make([]kv.EngineHash, 0, 64), make([]uint32, 0, 1024)
	}
}

// release drops the input and the scratch's contents.
func (dc *Decoder) release() {
	dc.buf, dc.off, dc.one = nil, 0, nil
	dc.resetScratch()
}

// resetScratch empties the scratch (kept for reuse, without references to strings or raw bytes).
func (dc *Decoder) resetScratch() {
	dc.hs, dc.toks = dc.hs[:0], dc.toks[:0]
}

// finish moves the events' hashes and tokens out of the scratch into per-batch slabs (one
// allocation each), keeping nil slices nil and empty ones empty, and resets the scratch.
func (dc *Decoder) finish(bt *Batch) {
	var nh, nt int
	for i := range bt.Events {
		ev := &bt.Events[i]
		nh += len(ev.BlockHashes)
		nt += len(ev.TokenIDs)
	}
	hs := make([]kv.EngineHash, 0, nh)
	toks := make([]uint32, 0, nt)
	for i := range bt.Events {
		ev := &bt.Events[i]
		if ev.BlockHashes != nil {
			s := len(hs)
			hs = append(hs, ev.BlockHashes...)
			ev.BlockHashes = hs[s:len(hs):len(hs)]
		}
		if ev.TokenIDs != nil {
			s := len(toks)
			toks = append(toks, ev.TokenIDs...)
			ev.TokenIDs = toks[s:len(toks):len(toks)]
		}
	}
	dc.resetScratch()
}
