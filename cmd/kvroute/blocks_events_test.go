package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/internal/goldens"
)

// TestBlocksGolden runs `kvroute blocks` on every normalize.jsonl prompt (identities passed as hex) and
// compares its exact output with the vectors.
func TestBlocksGolden(t *testing.T) {
	n := 0
	goldens.EachLine(t, "../../testdata/golden/normalize.jsonl", func(line []byte) {
		var r struct {
			ID     string         `json:"id"`
			Inputs map[string]any `json:"inputs"`
			Out    struct {
				Blocks []struct {
					Index     int    `json:"index"`
					Kind      string `json:"kind"`
					LocalHash string `json:"local_hash_hex"`
				} `json:"blocks"`
				RoutingTokens []uint32 `json:"routing_tokens"`
			} `json:"outputs"`
		}
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		for _, s := range r.Inputs["spans"].([]any) {
			m := s.(map[string]any)
			m["identity"] = m["identity_hex"]
			delete(m, "identity_hex")
		}
		in, _ := json.Marshal(r.Inputs)
		out, err := blocksCmd(nil, bytes.NewReader(in))
		if err != nil {
			t.Fatalf("%s: %v", r.ID, err)
		}
		wantBlocks := make([]blockOut, len(r.Out.Blocks))
		for i, b := range r.Out.Blocks {
			wantBlocks[i] = blockOut{Index: b.Index, Kind: b.Kind, LocalHash: b.LocalHash}
		}
		want := fmt.Sprintf(`{"blocks":%s,"routing_tokens":%s}`+"\n", mustJSON(wantBlocks), mustJSON(r.Out.RoutingTokens))
		if got := jsonOut(t, out); got != want {
			t.Errorf("%s:\n got %s\nwant %s", r.ID, got, want)
			return
		}
		n++
	})
	if n != 38 {
		t.Errorf("matched %d/38 normalize prompts", n)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestEventsGolden runs `kvroute events` on every vllm_events.jsonl batch and compares its exact output.
func TestEventsGolden(t *testing.T) {
	n := 0
	goldens.EachLine(t, "../../testdata/golden/vllm_events.jsonl", func(line []byte) {
		var r struct {
			ID         string `json:"id"`
			BlockSize  int    `json:"block_size"`
			PayloadHex string `json:"payload_hex"`
			Expected   struct {
				Stored []struct {
					EngineHash string  `json:"engine_hash"`
					Parent     *string `json:"parent_engine_hash"`
					LocalHash  string  `json:"local_hash_hex"`
					Kind       string  `json:"kind"`
				} `json:"stored"`
				Removed []string `json:"removed"`
				Cleared bool     `json:"cleared"`
			} `json:"expected"`
		}
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		raw, _ := hex.DecodeString(r.PayloadHex)
		var stderr bytes.Buffer
		out, err := eventsCmd([]string{"--model", testModelDir, "--encoding", "vllm", "--block-size", strconv.Itoa(r.BlockSize)}, bytes.NewReader(raw), &stderr)
		if err != nil {
			t.Fatalf("%s: %v", r.ID, err)
		}
		var sb strings.Builder
		sb.WriteString(`{"stored":[`)
		for i, s := range r.Expected.Stored {
			if i > 0 {
				sb.WriteString(",")
			}
			fmt.Fprintf(&sb, `{"engine_hash":%s,"parent_engine_hash":%s,"local_hash":%s,"kind":%s}`,
				mustJSON(s.EngineHash), mustJSON(s.Parent), mustJSON(s.LocalHash), mustJSON(s.Kind))
		}
		if r.Expected.Removed == nil {
			r.Expected.Removed = []string{}
		}
		fmt.Fprintf(&sb, `],"removed":%s,"cleared":%v,"skipped":[]}`+"\n", mustJSON(r.Expected.Removed), r.Expected.Cleared)
		if got := jsonOut(t, out); got != sb.String() || stderr.Len() != 0 {
			t.Errorf("%s:\n got %s\nwant %s\nstderr %s", r.ID, got, sb.String(), stderr.String())
			return
		}
		n++
	})
	if n != 19 {
		t.Errorf("matched %d/19 event batches", n)
	}
}

func TestEventsErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		args  []string
		stdin string
	}{
		"no model":        {[]string{"--encoding", "vllm", "--block-size", "16"}, ""},
		"bad encoding":    {[]string{"--model", testModelDir, "--encoding", "json", "--block-size", "16"}, ""},
		"no block size":   {[]string{"--model", testModelDir, "--encoding", "vllm"}, ""},
		"random bytes":    {[]string{"--model", testModelDir, "--encoding", "vllm", "--block-size", "16"}, "\x93\xc1\x00garbage"},
		"missing model":   {[]string{"--model", "/nonexistent", "--encoding", "vllm", "--block-size", "16"}, ""},
		"dynamo bad json": {[]string{"--model", testModelDir, "--encoding", "dynamo-json", "--block-size", "16"}, "{"},
		// [0.0, [["BlockStored", 5, 6]]]: a stored event whose fields do not fit (a wrong --encoding).
		"only malformed events": {[]string{"--model", testModelDir, "--encoding", "vllm", "--block-size", "16"},
			"\x92\x00\x91\x93\xabBlockStored\x05\x06"},
	} {
		if _, err := eventsCmd(tc.args, strings.NewReader(tc.stdin), io.Discard); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// An unknown event type is skipped and reported on stderr, not fatal.
	var stderr bytes.Buffer
	raw := []byte{0x92, 0x00, 0x91, 0x91, 0xa3, 'F', 'o', 'o'} // [0, [["Foo"]]]
	out, err := eventsCmd([]string{"--model", testModelDir, "--encoding", "sglang", "--block-size", "16"}, bytes.NewReader(raw), &stderr)
	if err != nil || jsonOut(t, out) != `{"stored":[],"removed":[],"cleared":false,"skipped":[]}`+"\n" || !strings.Contains(stderr.String(), "skipped 1 events of unknown type") {
		t.Errorf("unknown type: %v %v %q", out, err, stderr.String())
	}
}

func TestBlocksErrors(t *testing.T) {
	for name, in := range map[string]string{
		"bad json":      `{`,
		"no pads":       `{"block_size":2,"tokens":[1,2]}`,
		"bad identity":  `{"block_size":2,"tokens":[1,2],"image_pad":5,"video_pad":6,"spans":[{"start":0,"end":1,"identity":"xyz","kind":"image"}]}`,
		"bad kind":      `{"block_size":2,"tokens":[1,2],"image_pad":5,"video_pad":6,"spans":[{"start":0,"end":1,"identity":"0000000000000001","kind":"audio"}]}`,
		"span past end": `{"block_size":2,"tokens":[1,2],"image_pad":5,"video_pad":6,"spans":[{"start":0,"end":3,"identity":"0000000000000001","kind":"image"}]}`,
		"block size 0":  `{"block_size":0,"tokens":[1,2],"image_pad":5,"video_pad":6}`,
	} {
		if _, err := blocksCmd(nil, strings.NewReader(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	out, err := blocksCmd(nil, strings.NewReader(`{"block_size":4,"tokens":[1,2],"image_pad":5,"video_pad":6,"spans":[],"lora_name":null,"cache_salt":null}`))
	if err != nil || jsonOut(t, out) != `{"blocks":[],"routing_tokens":[]}`+"\n" {
		t.Errorf("partial block: %v %v", out, err)
	}
}
