package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/internal/goldens"
)

// hybridCase is one record of vllm_hybrid_events.jsonl.
type hybridCase struct {
	ID        string   `json:"id"`
	BlockSize int      `json:"block_size"`
	Batches   []string `json:"batches"`
	Expected  struct {
		Admitted []string `json:"admitted_stored_engine_hashes"`
		Local    []string `json:"local_hashes_hex"`
		Removed  []string `json:"removed_admitted"`
		Skipped  []struct {
			EngineHash string `json:"engine_hash"`
			Reason     string `json:"reason"`
		} `json:"skipped"`
	} `json:"expected"`
}

// runHybrid feeds a case's batches to `kvroute events --batches` with extra flags.
func runHybrid(t *testing.T, c hybridCase, extra ...string) (eventsOutput, string) {
	t.Helper()
	in, _ := json.Marshal(c.Batches)
	var stderr bytes.Buffer
	args := append([]string{"--batches", "--model", testModelDir, "--encoding", "vllm"}, extra...)
	out, err := eventsCmd(args, bytes.NewReader(in), &stderr)
	if err != nil {
		t.Fatalf("%s: %v", c.ID, err)
	}
	return out.(eventsOutput), stderr.String()
}

// TestEventsHybridGolden runs every vllm_hybrid_events.jsonl case through `kvroute events --batches`
// (each event at its own block_size) and compares the admitted stored blocks (engine hash and
// LocalBlockHash, in order), the admitted removals and every skipped hash with its reason.
func TestEventsHybridGolden(t *testing.T) {
	n := 0
	goldens.EachLine(t, "../../testdata/golden/vllm_hybrid_events.jsonl", func(line []byte) {
		var c hybridCase
		if err := json.Unmarshal(line, &c); err != nil {
			t.Fatal(err)
		}
		out, stderr := runHybrid(t, c)
		var gotHashes, gotLocal, gotSkipped, wantSkipped []string
		for _, s := range out.Stored {
			gotHashes = append(gotHashes, s.EngineHash)
			gotLocal = append(gotLocal, s.LocalHash)
		}
		for _, s := range out.Skipped {
			gotSkipped = append(gotSkipped, s.EngineHash+" "+s.Reason)
		}
		for _, s := range c.Expected.Skipped {
			wantSkipped = append(wantSkipped, s.EngineHash+" "+s.Reason)
		}
		ok := true
		for what, pair := range map[string][2][]string{
			"stored engine hashes": {gotHashes, c.Expected.Admitted},
			"local hashes":         {gotLocal, c.Expected.Local},
			"removed":              {out.Removed, c.Expected.Removed},
			"skipped":              {gotSkipped, wantSkipped},
		} {
			if len(pair[0])+len(pair[1]) > 0 && !slices.Equal(pair[0], pair[1]) {
				t.Errorf("%s: %s\n got %v\nwant %v", c.ID, what, pair[0], pair[1])
				ok = false
			}
		}
		if out.Cleared || stderr != "" {
			t.Errorf("%s: cleared %v, stderr %q", c.ID, out.Cleared, stderr)
			ok = false
		}
		if ok {
			n++
		}
	})
	if n != 48 {
		t.Errorf("matched %d/48 hybrid cases", n)
	}
}

// TestEventsHybridBlockSize checks --block-size with --batches: a dense event of another block size
// is skipped as block_size_mismatch (as the router does against the worker record), not indexed.
func TestEventsHybridBlockSize(t *testing.T) {
	var c hybridCase
	goldens.EachLine(t, "../../testdata/golden/vllm_hybrid_events.jsonl", func(line []byte) {
		if bytes.Contains(line, []byte(`"id":"hyb_nondense_event_block_size_differs"`)) {
			if err := json.Unmarshal(line, &c); err != nil {
				t.Fatal(err)
			}
		}
	})
	if c.ID == "" {
		t.Fatal("case hyb_nondense_event_block_size_differs not found")
	}
	out, _ := runHybrid(t, c, "--block-size", strconv.Itoa(c.BlockSize))
	var got []string
	for _, s := range out.Skipped {
		got = append(got, s.EngineHash+" "+s.Reason)
	}
	// Event 0 (64 tokens, 2 hashes, block_size 16) is non-dense; event 1 (dense at its block_size 32)
	// is then the block size mismatch against --block-size 16.
	want := []string{"13679136426987588807 non_dense_block_span", "17522210158101164678 non_dense_block_span",
		c.Expected.Admitted[0] + " block_size_mismatch", c.Expected.Admitted[1] + " block_size_mismatch"}
	if len(out.Stored) != 0 || !slices.Equal(got, want) {
		t.Errorf("stored %v, skipped\n got %v\nwant %v", out.Stored, got, want)
	}
	// Bad --batches input is an error, not an empty answer.
	for _, in := range []string{`{`, `["not base64!"]`, `[1]`} {
		if _, err := eventsCmd([]string{"--batches", "--model", testModelDir, "--encoding", "vllm"}, strings.NewReader(in), &bytes.Buffer{}); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}

// TestEventsSingleHybridBatch is the symptom on one raw batch without --batches: the Mamba
// group's BlockStored (group_idx 1, kv_cache_spec_kind "mamba") is listed under skipped, not stored.
func TestEventsSingleHybridBatch(t *testing.T) {
	var c hybridCase
	goldens.EachLine(t, "../../testdata/golden/vllm_hybrid_events.jsonl", func(line []byte) {
		if bytes.Contains(line, []byte(`"id":"hyb_qwen35_B528_store"`)) {
			if err := json.Unmarshal(line, &c); err != nil {
				t.Fatal(err)
			}
		}
	})
	if len(c.Batches) != 1 {
		t.Fatalf("case hyb_qwen35_B528_store: %d batches", len(c.Batches))
	}
	raw, err := base64.StdEncoding.DecodeString(c.Batches[0])
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	out, err := eventsCmd([]string{"--model", testModelDir, "--encoding", "vllm", "--block-size", "528"}, bytes.NewReader(raw), &stderr)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(eventsOutput)
	var hashes []string
	for _, s := range got.Stored {
		hashes = append(hashes, s.EngineHash)
	}
	if !slices.Equal(hashes, c.Expected.Admitted) || len(got.Skipped) != 1 ||
		got.Skipped[0] != (skippedOut{EngineHash: "13864723106402458930", Reason: "kind_not_admitted"}) || stderr.Len() != 0 {
		t.Errorf("stored %v skipped %+v stderr %q", hashes, got.Skipped, stderr.String())
	}
}
