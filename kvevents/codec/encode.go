package codec

import (
	"bytes"
	"fmt"

	"github.com/kvroute/kvroute/kv"

	"github.com/vmihailenco/msgpack/v5"
)

// Form is a msgspec struct encoding: positional array (array_like=True, vLLM before PR #42892) or map.
type Form uint8

const (
	// ArrayForm encodes a struct as [tag?, field…] with trailing defaults omitted.
	ArrayForm Form = iota + 1
	// MapForm encodes a struct as {"type"?: tag, field: value…} with defaults omitted.
	MapForm
)

// EncodeVLLM writes b as vLLM's msgspec encoder does (vllm/distributed/kv_events.py KVEventBatch with
// omit_defaults): the batch in batchForm ([ts, events, dp_rank?] or {ts, events, data_parallel_rank?},
// dp rank omitted when !HasDPRank) and every event in eventForm. BlockStored fields in order:
// block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium, lora_name (always present,
// null when unset), then extra_keys, group_idx and kv_cache_spec_kind when set (MapForm: each set one;
// ArrayForm: up to the last set one, the unset ones before it as null); BlockRemoved: block_hashes,
// medium, group_idx?; AllBlocksCleared: no fields. Block hashes are written as signed int64, as vLLM's int hashes are (bitwise u64 → int64).
// Unknown event types, and KeyOther items whose Raw is not one msgpack value, are errors.
func EncodeVLLM(b *Batch, batchForm, eventForm Form) ([]byte, error) {
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	w := &writer{e: e}
	if batchForm == MapForm {
		n := 2
		if b.HasDPRank {
			n++
		}
		w.mapLen(n)
		w.str("ts")
		w.e.EncodeFloat64(b.TS)
		w.str("events")
	} else {
		n := 2
		if b.HasDPRank {
			n++
		}
		w.arrayLen(n)
		w.e.EncodeFloat64(b.TS)
	}
	w.arrayLen(len(b.Events))
	for i := range b.Events {
		if err := w.event(&b.Events[i], eventForm); err != nil {
			return nil, fmt.Errorf("encoding event %d: %w", i, err)
		}
	}
	if b.HasDPRank {
		if batchForm == MapForm {
			w.str("data_parallel_rank")
		}
		w.e.EncodeInt(b.DPRank)
	}
	if w.err != nil {
		return nil, fmt.Errorf("encoding batch: %w", w.err)
	}
	return buf.Bytes(), nil
}

// writer keeps the first encoder error so the encoding code reads straight.
type writer struct {
	e   *msgpack.Encoder
	err error
}

func (w *writer) keep(err error) {
	if w.err == nil {
		w.err = err
	}
}
func (w *writer) arrayLen(n int) { w.keep(w.e.EncodeArrayLen(n)) }
func (w *writer) mapLen(n int)   { w.keep(w.e.EncodeMapLen(n)) }
func (w *writer) str(s string)   { w.keep(w.e.EncodeString(s)) }
func (w *writer) int(n int64)    { w.keep(w.e.EncodeInt(n)) }
func (w *writer) null()          { w.keep(w.e.EncodeNil()) }

func (w *writer) optStr(s string, ok bool) {
	if ok {
		w.str(s)
	} else {
		w.null()
	}
}

func (w *writer) optInt(n int64, ok bool) {
	if ok {
		w.int(n)
	} else {
		w.null()
	}
}

func (w *writer) hashes(hs []kv.EngineHash) {
	w.arrayLen(len(hs))
	for _, h := range hs {
		w.int(int64(h))
	}
}

// field writes one named field of ev (its key first in MapForm).
func (w *writer) field(ev *Event, name string, form Form) error {
	if form == MapForm {
		w.str(name)
	}
	switch name {
	case "block_hashes":
		w.hashes(ev.BlockHashes)
	case "parent_block_hash":
		w.optInt(int64(ev.Parent), ev.HasParent)
	case "token_ids":
		w.arrayLen(len(ev.TokenIDs))
		for _, t := range ev.TokenIDs {
			w.keep(w.e.EncodeUint(uint64(t)))
		}
	case "block_size":
		w.int(int64(ev.BlockSize))
	case "lora_id":
		w.optInt(ev.LoRAID, ev.HasLoRAID)
	case "medium":
		w.optStr(ev.Medium, ev.HasMedium)
	case "lora_name":
		w.optStr(ev.LoRAName, ev.HasLoRAName)
	case "extra_keys":
		if !ev.HasExtraKeys {
			w.null()
			return nil
		}
		w.arrayLen(len(ev.ExtraKeys))
		for _, items := range ev.ExtraKeys {
			if items == nil {
				w.null()
				continue
			}
			w.arrayLen(len(items))
			for _, k := range items {
				if err := w.extraKey(k); err != nil {
					return err
				}
			}
		}
	case "group_idx":
		w.optInt(ev.GroupIdx, ev.HasGroupIdx)
	case "kv_cache_spec_kind":
		w.optStr(ev.SpecKind, ev.HasSpecKind)
	}
	return nil
}

// eventFields lists the fields of ev to write: the required first ones, then the optional ones that
// are set (MapForm: each on its own, as msgspec omits every default; ArrayForm: up to the last set
// one, the unset ones before it written as null).
func eventFields(ev *Event, all []string, required int, form Form) []string {
	names := all[:required]
	last := required
	for i := required; i < len(all); i++ {
		if !optionalSet(ev, all[i]) {
			continue
		}
		last = i + 1
		if form == MapForm {
			if len(names) == required {
				names = append([]string(nil), names...)
			}
			names = append(names, all[i])
		}
	}
	if form == MapForm {
		return names
	}
	return all[:last]
}

func optionalSet(ev *Event, name string) bool {
	switch name {
	case "extra_keys":
		return ev.HasExtraKeys
	case "group_idx":
		return ev.HasGroupIdx
	case "kv_cache_spec_kind":
		return ev.HasSpecKind
	}
	return false
}

func (w *writer) extraKey(k ExtraKey) error {
	switch k.Kind {
	case KeyString:
		w.str(k.Str)
	case KeyPair:
		w.arrayLen(2)
		w.str(k.Str)
		w.int(k.Offset)
	case KeyOther:
		if end, err := skipValue(k.Raw, 0); err != nil || end != len(k.Raw) {
			return fmt.Errorf("encoding extra key: raw item is not one msgpack value: %w", ErrMalformed)
		}
		_, err := w.e.Writer().Write(k.Raw)
		w.keep(err)
	default:
		return fmt.Errorf("encoding extra key: kind %d: %w", k.Kind, ErrMalformed)
	}
	return nil
}

func (w *writer) event(ev *Event, form Form) error {
	var names []string
	switch ev.Type {
	case BlockStored:
		names = eventFields(ev, storedFields[:10], 7, form)
	case BlockRemoved:
		names = eventFields(ev, removedFields[:3], 2, form)
	case AllBlocksCleared:
	default:
		return fmt.Errorf("encoding event type %d: %w", ev.Type, ErrMalformed)
	}
	if form == MapForm {
		w.mapLen(1 + len(names))
		w.str("type")
	} else {
		w.arrayLen(1 + len(names))
	}
	w.str(ev.Type.String())
	for _, name := range names {
		if err := w.field(ev, name, form); err != nil {
			return err
		}
	}
	return nil
}
