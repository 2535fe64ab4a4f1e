package codec

import (
	"fmt"
	"math"
)

// This file is the vLLM event layout (SGLang publishes the same): BlockStored, BlockRemoved and
// AllBlocksCleared as msgspec tagged arrays (tag first, fields in declaration order; vLLM before PR
// #42892) or maps (a "type" key), the fields each vLLM version adds, and the names it reads. The
// forms of the field values are read in vllm_values.go.

// Field names of vLLM's msgspec structs, in declaration (array) order (vllm/distributed/kv_events.py
// BlockStored and BlockRemoved, with the KV cache group fields of hybrid models and the fields after
// them; the decoder reads past the ones it does not use).
var (
	storedFields = []string{"block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name",
		"extra_keys", "group_idx", "kv_cache_spec_kind", "kv_cache_spec_sliding_window", "locality", "ownership", "session_id"}
	removedFields = []string{"block_hashes", "medium", "group_idx", "locality", "ownership"}
)

func parseType(tag string) (Type, error) {
	switch tag {
	case "BlockStored":
		return BlockStored, nil
	case "BlockRemoved":
		return BlockRemoved, nil
	case "AllBlocksCleared":
		return AllBlocksCleared, nil
	}
	return 0, fmt.Errorf("reading event tag %q: %w", tag, errUnknownType)
}

// name reads a map key or event tag and returns it as one of the known field names (no allocation),
// or a copy of any other string.
func (dc *Decoder) name(what string) (string, error) {
	b, next, ok := rawStr(dc.buf, dc.off)
	if !ok {
		c, _ := dc.peek()
		return "", malformed(what, c)
	}
	dc.off = next
	switch string(b) {
	case "type":
		return "type", nil
	case "ts":
		return "ts", nil
	case "events":
		return "events", nil
	case "data_parallel_rank":
		return "data_parallel_rank", nil
	case "attn_dp_rank":
		return "attn_dp_rank", nil
	case "BlockStored":
		return "BlockStored", nil
	case "BlockRemoved":
		return "BlockRemoved", nil
	case "AllBlocksCleared":
		return "AllBlocksCleared", nil
	}
	for _, f := range storedFields {
		if string(b) == f {
			return f, nil
		}
	}
	return string(b), nil
}

// event decodes one event, array (tag first) or map ("type" key) encoded.
func (dc *Decoder) event() (Event, error) {
	var ev Event
	c, err := dc.peek()
	if err != nil {
		return ev, err
	}
	switch {
	case isArray(c):
		n, err := dc.arrayLen("event")
		if err != nil {
			return ev, err
		}
		if n == 0 {
			return ev, fmt.Errorf("reading event: empty array: %w", ErrMalformed)
		}
		tag, err := dc.name("event tag")
		if err != nil {
			return ev, err
		}
		if ev.Type, err = parseType(tag); err != nil {
			return ev, err
		}
		names := storedFields
		switch ev.Type {
		case BlockRemoved:
			names = removedFields
		case AllBlocksCleared:
			names = nil
		}
		for i := 1; i < n; i++ {
			name := ""
			if i-1 < len(names) {
				name = names[i-1]
			}
			if err := dc.field(&ev, name); err != nil {
				return ev, err
			}
		}
	case isMap(c):
		n, err := dc.mapLen("event map")
		if err != nil {
			return ev, err
		}
		for i := 0; i < n; i++ {
			key, err := dc.name("event key")
			if err != nil {
				return ev, err
			}
			if key == "type" {
				tag, err := dc.name("event type")
				if err != nil {
					return ev, err
				}
				if ev.Type, err = parseType(tag); err != nil {
					return ev, err
				}
				continue
			}
			if err := dc.field(&ev, key); err != nil {
				return ev, err
			}
		}
		if ev.Type == 0 {
			return ev, fmt.Errorf("reading event map: no type: %w", ErrMalformed)
		}
	default:
		return ev, malformed("event", c)
	}
	if ev.Type != AllBlocksCleared && ev.BlockHashes == nil {
		return ev, fmt.Errorf("reading %s: no block_hashes: %w", ev.Type, ErrMalformed)
	}
	return ev, nil
}

// field decodes one named event field into ev; unknown names are skipped.
func (dc *Decoder) field(ev *Event, name string) (err error) {
	switch name {
	case "block_hashes":
		ev.BlockHashes, err = dc.hashes()
	case "parent_block_hash":
		var null bool
		if null, err = dc.isNil(); err == nil && !null {
			ev.Parent, err = dc.hash()
			ev.HasParent = err == nil
		}
	case "token_ids":
		ev.TokenIDs, err = dc.tokens()
	case "block_size":
		var n int64
		n, err = dc.int64v("block_size")
		if err == nil && (n < 0 || n > math.MaxInt32) {
			err = fmt.Errorf("reading block_size %d: out of range: %w", n, ErrMalformed)
		}
		ev.BlockSize = int(n)
	case "lora_id":
		ev.LoRAID, ev.HasLoRAID, err = dc.optInt("lora_id")
	case "medium":
		ev.Medium, ev.HasMedium, err = dc.optStr("medium")
	case "lora_name":
		ev.LoRAName, ev.HasLoRAName, err = dc.optStr("lora_name")
	case "extra_keys":
		ev.ExtraKeys, ev.HasExtraKeys, err = dc.extraKeys()
	case "group_idx":
		ev.GroupIdx, ev.HasGroupIdx, err = dc.optInt("group_idx")
	case "kv_cache_spec_kind":
		ev.SpecKind, ev.HasSpecKind, err = dc.optStr("kv_cache_spec_kind")
	default:
		err = dc.skip(inEvent)
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", name, err)
	}
	return nil
}
