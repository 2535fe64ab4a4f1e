package subscriber_test

import (
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/internal/goldens"
	"github.com/kvroute/kvroute/kvevents/registry"
	"github.com/kvroute/kvroute/kvevents/subscriber"
)

type goldenStored struct {
	EngineHash    string   `json:"engine_hash"`
	ParentHash    *string  `json:"parent_engine_hash"`
	LocalHash     string   `json:"local_hash"`
	IdentitiesHex []string `json:"identities_hex"`
}

type goldenRecord struct {
	ID         string          `json:"id"`
	PayloadHex string          `json:"payload_hex"`
	Decoded    json.RawMessage `json:"decoded"`
	Expected   struct {
		Stored  []goldenStored `json:"stored"`
		Removed []string       `json:"removed"`
		Cleared bool           `json:"cleared"`
	} `json:"expected"`
}

func goldenRecords(t *testing.T) map[string]goldenRecord {
	out := map[string]goldenRecord{}
	for _, r := range goldens.Records[goldenRecord](t, "../../testdata/golden/vllm_events.jsonl") {
		out[r.ID] = r
	}
	return out
}

func (r goldenRecord) payload(t *testing.T) []byte {
	t.Helper()
	b, err := hex.DecodeString(r.PayloadHex)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func u64(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// paths returns every expected stored block's root path of golden local hashes.
func (r goldenRecord) paths(t *testing.T) [][]kv.BlockHash {
	t.Helper()
	byEngine := map[string][]kv.BlockHash{}
	var out [][]kv.BlockHash
	for _, s := range r.Expected.Stored {
		var p []kv.BlockHash
		if s.ParentHash != nil {
			p = slices.Clone(byEngine[*s.ParentHash])
		}
		p = append(p, kv.BlockHash(u64(t, s.LocalHash)))
		byEngine[s.EngineHash] = p
		out = append(out, p)
	}
	return out
}

// TestGoldenEncodingsSameIndex publishes both vLLM encodings (positional arrays and tagged maps) of
// each golden event set to two workers: both end with the same index state, and every stored chain
// is found under the golden LocalBlockHash values.
func TestGoldenEncodingsSameIndex(t *testing.T) {
	recs := goldenRecords(t)
	e := newEnv(t, nil)
	var names []string
	for id := range recs {
		if strings.HasSuffix(id, "_array") && recs[strings.TrimSuffix(id, "_array")+"_map"].ID != "" {
			names = append(names, strings.TrimSuffix(id, "_array"))
		}
	}
	slices.Sort(names)
	if len(names) != 9 {
		t.Fatalf("found %d golden event sets in both encodings, want 9", len(names))
	}
	var ws []registry.Worker
	for i := range names {
		ws = append(ws, worker("a"+strconv.Itoa(i), 1), worker("m"+strconv.Itoa(i), 1))
	}
	e.sub.SetWorkers(ws)
	for _, w := range ws { // no bridge: the registration replays fail, the streams wait for seq 0
		e.waitState(w.WorkerID, subscriber.StateUnsynced)
	}
	for i, name := range names {
		e.publish("a"+strconv.Itoa(i), 0, 0, "vllm", recs[name+"_array"].payload(t))
		e.publish("m"+strconv.Itoa(i), 0, 0, "vllm", recs[name+"_map"].payload(t))
	}
	for _, w := range ws {
		e.waitSeq(w.WorkerID, 0)
	}
	for i, name := range names {
		t.Run(name, func(t *testing.T) {
			a, m := "a"+strconv.Itoa(i), "m"+strconv.Itoa(i)
			r := recs[name+"_array"]
			wantBlocks := len(r.Expected.Stored) - len(r.Expected.Removed)
			if r.Expected.Cleared {
				wantBlocks = 0
			}
			_, wa := e.rank0(a)
			_, wm := e.rank0(m)
			if wa.Blocks != wantBlocks || wm.Blocks != wantBlocks {
				t.Errorf("blocks: array %d, map %d, want %d", wa.Blocks, wm.Blocks, wantBlocks)
			}
			for _, p := range r.paths(t) {
				ga, gm := overlap(e.ix, a, p), overlap(e.ix, m, p)
				if ga != gm {
					t.Errorf("path of %d blocks: array overlap %d, map overlap %d", len(p), ga, gm)
				}
				if len(r.Expected.Removed) == 0 && !r.Expected.Cleared && ga != len(p) {
					t.Errorf("path of %d blocks: overlap %d, want all", len(p), ga)
				}
			}
			if wa.Events[subscriber.ResultApplied] != 1 || wm.Events[subscriber.ResultApplied] != 1 {
				t.Errorf("applied: array %v, map %v", wa.Events, wm.Events)
			}
		})
	}
}

type storedCall struct {
	worker string
	tokens []uint32
	keys   []kv.MediaKey
}

// TestVerifyHook checks the layout verification callback on the golden video events: every stored
// block that names an identity is reported with its worker tokens and its [identifier, offset] (or
// bare identifier) items.
func TestVerifyHook(t *testing.T) {
	recs := goldenRecords(t)
	e := newEnv(t, nil)
	var mu sync.Mutex
	var calls []storedCall
	e.sub.SetOnStored(func(id string, tokens []uint32, keys []kv.MediaKey) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, storedCall{id, slices.Clone(tokens), slices.Clone(keys)})
	})
	e.sub.SetWorkers([]registry.Worker{worker("pairs", 1), worker("bare", 1), worker("text", 1)})
	for _, id := range []string{"pairs", "bare", "text"} {
		e.waitState(id, subscriber.StateUnsynced)
	}
	e.publish("pairs", 0, 0, "vllm", recs["ev_video_pairs_map"].payload(t))
	e.publish("bare", 0, 0, "vllm", recs["ev_video_bare_strings_array"].payload(t))
	e.publish("text", 0, 0, "vllm", recs["ev_text_chain3_no_extra_keys_array"].payload(t))
	for _, id := range []string{"pairs", "bare", "text"} {
		e.waitSeq(id, 0)
	}
	mu.Lock()
	defer mu.Unlock()
	// Expected from the golden record's decoded array form: tokens per block, extra_keys items.
	want := func(worker, rec string) []storedCall {
		var batch []json.RawMessage
		if err := json.Unmarshal(recs[rec].Decoded, &batch); err != nil {
			t.Fatal(err)
		}
		var evs [][]json.RawMessage
		if err := json.Unmarshal(batch[1], &evs); err != nil {
			t.Fatal(err)
		}
		var tokens []uint32
		var extra [][]json.RawMessage
		if err := json.Unmarshal(evs[0][3], &tokens); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(evs[0][8], &extra); err != nil {
			t.Fatal(err)
		}
		var out []storedCall
		for i, items := range extra {
			c := storedCall{worker: worker, tokens: tokens[i*16 : (i+1)*16]}
			for _, it := range items {
				var s string
				var pair []json.RawMessage
				k := kv.MediaKey{}
				if json.Unmarshal(it, &s) != nil {
					if err := json.Unmarshal(it, &pair); err != nil {
						t.Fatal(err)
					}
					_ = json.Unmarshal(pair[0], &s)
					_ = json.Unmarshal(pair[1], &k.Offset)
					k.HasOffset = true
				}
				k.Identity = kv.Identity(u64hex(t, s[:16]))
				c.keys = append(c.keys, k)
			}
			out = append(out, c)
		}
		return out
	}
	wantCalls := append(want("pairs", "ev_video_pairs_array"), want("bare", "ev_video_bare_strings_array")...)
	byWorker := func(cs []storedCall, w string) []storedCall {
		var out []storedCall
		for _, c := range cs {
			if c.worker == w {
				out = append(out, c)
			}
		}
		return out
	}
	for _, w := range []string{"pairs", "bare", "text"} {
		got, exp := byWorker(calls, w), byWorker(wantCalls, w)
		if len(got) != len(exp) {
			t.Fatalf("%s: %d calls, want %d", w, len(got), len(exp))
		}
		for i := range got {
			if !slices.Equal(got[i].tokens, exp[i].tokens) || !slices.Equal(got[i].keys, exp[i].keys) {
				t.Errorf("%s block %d: got keys %+v, want %+v (tokens equal: %v)", w, i, got[i].keys, exp[i].keys, slices.Equal(got[i].tokens, exp[i].tokens))
			}
		}
	}
	// the golden identities, and the offsets vLLM computed (13, -3, -19, -35)
	if p := byWorker(calls, "pairs"); len(p) != 4 || p[0].keys[0].Identity != 0xf59cf8ff37063733 ||
		p[0].keys[0].Offset != 13 || p[3].keys[0].Offset != -35 {
		t.Errorf("pairs: %+v", p)
	}
	if b := byWorker(calls, "bare"); len(b) != 6 || b[5].keys[0] != (kv.MediaKey{Identity: 0x51c22565f5f9c525}) {
		t.Errorf("bare: %+v", b)
	}
}

func u64hex(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
