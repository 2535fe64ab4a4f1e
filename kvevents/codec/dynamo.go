package codec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/kvroute/kvroute/kv"
)

// Dynamo RouterEvent batches (ai-dynamo lib/kv-router/src/protocols.rs, serde):
//
//	RouterEvent{worker_id u64, storage_tier?, event: KvCacheEvent}
//	KvCacheEvent{event_id u64, data: KvCacheEventData, dp_rank u32 = 0}
//	KvCacheEventData = {"stored": {parent_hash u64|null, start_position?, blocks: [{block_hash u64,
//	                   tokens_hash u64, mm_extra_info?}]}} | {"removed": {block_hashes: [u64]}} | "cleared"
//
// A batch is a list of RouterEvents (one RouterEvent alone is accepted too). JSON comes from
// serde_json, msgpack from rmp_serde::to_vec_named (maps with field names, the same shape).

func decodeDynamoJSON(b []byte) (*Batch, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("decoding dynamo-json batch: %w: %w", ErrMalformed, err)
	}
	if d.More() {
		return nil, fmt.Errorf("decoding dynamo-json batch: trailing data: %w", ErrMalformed)
	}
	return dynamoBatch(v)
}

func (dc *Decoder) decodeDynamoMsgpack(b []byte) (*Batch, error) {
	// skipValue bounds nesting and rejects truncation before the recursive generic decoder runs.
	end, err := skipValue(b, 0)
	if err != nil {
		return nil, fmt.Errorf("decoding dynamo-msgpack batch: %w", err)
	}
	if end != len(b) {
		return nil, fmt.Errorf("decoding dynamo-msgpack batch: %d trailing bytes: %w", len(b)-end, ErrMalformed)
	}
	dc.reset(b)
	defer dc.reset(nil)
	v, err := dc.d.DecodeInterface()
	if err != nil {
		return nil, fmt.Errorf("decoding dynamo-msgpack batch: %w: %w", ErrMalformed, err)
	}
	return dynamoBatch(v)
}

func dynamoBatch(v any) (*Batch, error) {
	var list []any
	switch t := v.(type) {
	case []any:
		list = t
	case map[string]any:
		list = []any{t}
	default:
		return nil, fmt.Errorf("decoding dynamo batch: want a list of RouterEvent: %w", ErrMalformed)
	}
	bt := &Batch{Events: make([]Event, 0, len(list))}
	for i, item := range list {
		ev, err := dynamoEvent(item)
		if err != nil {
			bt.skip(fmt.Errorf("router event %d: %w", i, err))
			continue
		}
		bt.Events = append(bt.Events, ev)
	}
	return bt, nil
}

func dynamoEvent(item any) (Event, error) {
	var ev Event
	re, ok := item.(map[string]any)
	if !ok {
		return ev, fmt.Errorf("reading router event: not a map: %w", ErrMalformed)
	}
	var err error
	if ev.WorkerID, err = u64Of(re["worker_id"], "worker_id"); err != nil {
		return ev, err
	}
	if t, ok := re["storage_tier"].(string); ok {
		ev.Medium, ev.HasMedium = t, true
	}
	kv, ok := re["event"].(map[string]any)
	if !ok {
		return ev, fmt.Errorf("reading event: not a map: %w", ErrMalformed)
	}
	if ev.EventID, err = u64Of(kv["event_id"], "event_id"); err != nil {
		return ev, err
	}
	if r, ok := kv["dp_rank"]; ok && r != nil {
		n, err := u64Of(r, "dp_rank")
		if err != nil || n > math.MaxUint32 {
			return ev, fmt.Errorf("reading dp_rank: %w", ErrMalformed)
		}
		ev.DPRank = int64(n)
	}
	switch data := kv["data"].(type) {
	case string:
		if data != "cleared" {
			return ev, fmt.Errorf("reading event data %q: %w", data, errUnknownType)
		}
		ev.Type = AllBlocksCleared
		return ev, nil
	case map[string]any:
		if len(data) != 1 {
			return ev, fmt.Errorf("reading event data: %d variants: %w", len(data), ErrMalformed)
		}
		if _, ok := data["cleared"]; ok {
			ev.Type = AllBlocksCleared
			return ev, nil
		}
		if st, ok := data["stored"].(map[string]any); ok {
			return dynamoStored(ev, st)
		}
		if rm, ok := data["removed"].(map[string]any); ok {
			ev.Type = BlockRemoved
			ev.BlockHashes, err = engineHashList(rm["block_hashes"], "block_hashes")
			return ev, err
		}
		for k := range data {
			return ev, fmt.Errorf("reading event data %q: %w", k, errUnknownType)
		}
	}
	return ev, fmt.Errorf("reading event data: %w", ErrMalformed)
}

func dynamoStored(ev Event, st map[string]any) (Event, error) {
	ev.Type = BlockStored
	if p := st["parent_hash"]; p != nil {
		h, err := u64Of(p, "parent_hash")
		if err != nil {
			return ev, err
		}
		ev.Parent, ev.HasParent = kv.EngineHash(h), true
	}
	blocks, ok := st["blocks"].([]any)
	if !ok {
		return ev, fmt.Errorf("reading blocks: not a list: %w", ErrMalformed)
	}
	ev.BlockHashes = make([]kv.EngineHash, len(blocks))
	ev.LocalHashes = make([]kv.BlockHash, len(blocks))
	for i, b := range blocks {
		m, ok := b.(map[string]any)
		if !ok {
			return ev, fmt.Errorf("reading block %d: not a map: %w", i, ErrMalformed)
		}
		eh, err := u64Of(m["block_hash"], "block_hash")
		if err != nil {
			return ev, err
		}
		lh, err := u64Of(m["tokens_hash"], "tokens_hash")
		if err != nil {
			return ev, err
		}
		ev.BlockHashes[i], ev.LocalHashes[i] = kv.EngineHash(eh), kv.BlockHash(lh)
	}
	return ev, nil
}

// engineHashList reads a list of engine hashes (each as u64Of).
func engineHashList(v any, what string) ([]kv.EngineHash, error) {
	l, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("reading %s: not a list: %w", what, ErrMalformed)
	}
	out := make([]kv.EngineHash, len(l))
	for i, x := range l {
		h, err := u64Of(x, what)
		if err != nil {
			return nil, err
		}
		out[i] = kv.EngineHash(h)
	}
	return out, nil
}

// u64Of converts a decoded JSON number or msgpack integer to u64 (negative integers bitwise).
func u64Of(v any, what string) (uint64, error) {
	switch n := v.(type) {
	case json.Number:
		if u, err := strconv.ParseUint(string(n), 10, 64); err == nil {
			return u, nil
		}
		if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
			return uint64(i), nil
		}
	case uint64:
		return n, nil
	case int64:
		return uint64(n), nil
	case uint8:
		return uint64(n), nil
	case uint16:
		return uint64(n), nil
	case uint32:
		return uint64(n), nil
	case int8:
		return uint64(n), nil
	case int16:
		return uint64(n), nil
	case int32:
		return uint64(n), nil
	}
	return 0, fmt.Errorf("reading %s: not an integer: %w", what, ErrMalformed)
}
