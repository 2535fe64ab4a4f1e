package codec

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// This file reads the engine batch envelope (vllm/distributed/kv_events.py KVEventBatch): [ts,
// events, data_parallel_rank?] or {ts, events, data_parallel_rank | attn_dp_rank (SGLang)}, decoded
// in one pass with a checked second pass for bad input.

// decodeEngine decodes a vLLM or SGLang batch: [ts, events, dp_rank?] or {ts, events, data_parallel_rank}.
//
// It first decodes in one pass, assuming well-formed input; that result stands when every event
// decoded and the batch ended exactly at len(b), since every byte was then read by a check at least
// as strict as skipValue's (nested skips included, see skipNested). Otherwise the batch is checked
// whole by skipValue first and decoded again, which gives the errors and skip counts of bad input.
func (dc *Decoder) decodeEngine(b []byte) (*Batch, error) {
	dc.ensureScratch()
	bt, err := dc.decodeEngineBody(b)
	if err == nil && bt.Unknown == 0 && bt.Malformed == 0 && dc.off == len(b) {
		dc.release()
		return bt, nil
	}
	dc.release()
	return dc.decodeEngineChecked(b)
}

// decodeEngineChecked checks the whole batch with skipValue, then decodes it.
func (dc *Decoder) decodeEngineChecked(b []byte) (*Batch, error) {
	end, err := skipValue(b, 0)
	if err != nil {
		return nil, err
	}
	if end != len(b) {
		return nil, fmt.Errorf("reading batch: %d trailing bytes: %w", len(b)-end, ErrMalformed)
	}
	dc.ensureScratch()
	defer dc.release()
	return dc.decodeEngineBody(b)
}

// decodeEngineBody decodes an engine batch from b[0], leaving dc.off after it.
func (dc *Decoder) decodeEngineBody(b []byte) (*Batch, error) {
	dc.buf, dc.off = b, 0
	box := &batchBox{}
	bt := &box.b
	dc.one = &box.ev
	c, _ := dc.peek()
	switch {
	case isArray(c):
		n, err := dc.arrayLen("batch")
		if err != nil {
			return nil, err
		}
		if n < 2 {
			return nil, fmt.Errorf("reading batch: %d fields: %w", n, ErrMalformed)
		}
		if bt.TS, err = dc.ts(); err != nil {
			return nil, err
		}
		if err := dc.events(bt); err != nil {
			return nil, err
		}
		if n >= 3 {
			if bt.DPRank, bt.HasDPRank, err = dc.optInt("data_parallel_rank"); err != nil {
				return nil, err
			}
		}
	case isMap(c):
		n, err := dc.mapLen("batch map")
		if err != nil {
			return nil, err
		}
		seen := false
		for i := 0; i < n; i++ {
			key, err := dc.name("batch key")
			if err != nil {
				return nil, err
			}
			switch key {
			case "ts":
				bt.TS, err = dc.ts()
			case "events":
				seen = true
				err = dc.events(bt)
			case "data_parallel_rank", "attn_dp_rank": // SGLang names it attn_dp_rank
				bt.DPRank, bt.HasDPRank, err = dc.optInt("data_parallel_rank")
			default:
				err = dc.skip(inBatch)
			}
			if err != nil {
				return nil, err
			}
		}
		if !seen {
			return nil, fmt.Errorf("reading batch map: no events: %w", ErrMalformed)
		}
	default:
		return nil, malformed("batch", c)
	}
	return bt, nil
}

func (dc *Decoder) events(bt *Batch) error {
	if null, err := dc.isNil(); null || err != nil {
		return err
	}
	n, err := dc.arrayLen("events")
	if err != nil {
		return err
	}
	if n == 1 && dc.one != nil { // the common single-event batch: its Event lives with the Batch
		bt.Events, dc.one = dc.one[:0:1], nil
	} else {
		bt.Events = make([]Event, 0, n)
	}
	for i := 0; i < n; i++ {
		// A successful event() ends exactly at the event's end; only a failed one needs its extent
		// to resynchronize.
		start := dc.pos()
		ev, err := dc.event()
		if err == nil {
			bt.Events = append(bt.Events, ev)
			continue
		}
		bt.skip(fmt.Errorf("event %d: %w", i, err))
		end, err := skipValue(dc.buf, start)
		if err != nil {
			return err
		}
		dc.seek(end)
	}
	dc.finish(bt)
	return nil
}

func (dc *Decoder) ts() (float64, error) {
	c, err := dc.peek()
	if err != nil {
		return 0, err
	}
	b, off := dc.buf, dc.off
	switch {
	case c == msgpcode.Nil:
		dc.off++
		return 0, nil
	case isInt(c):
		v, _, next, ok := rawInt(b, off)
		if !ok {
			return 0, fmt.Errorf("reading ts: %w", errTruncated)
		}
		dc.off = next
		return float64(int64(v)), nil
	case c == msgpcode.Float:
		if len(b)-off < 5 {
			return 0, fmt.Errorf("reading ts: %w", errTruncated)
		}
		dc.off += 5
		return float64(math.Float32frombits(binary.BigEndian.Uint32(b[off+1:]))), nil
	case c == msgpcode.Double:
		if len(b)-off < 9 {
			return 0, fmt.Errorf("reading ts: %w", errTruncated)
		}
		dc.off += 9
		return math.Float64frombits(binary.BigEndian.Uint64(b[off+1:])), nil
	}
	return 0, malformed("ts", c)
}
