package sim_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/internal/sim"
	"github.com/kvroute/kvroute/internal/testkit"
	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/kvevents/codec"
)

type simUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// post sends a chat body and returns the hit header and the usage (from the JSON body, or the
// usage chunk of an SSE stream).
func post(t *testing.T, url, body string) (int, simUsage) {
	t.Helper()
	res, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := res.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", res.StatusCode, b.String())
	}
	hit, err := strconv.Atoi(res.Header.Get(sim.HitBlocksHeader))
	if err != nil {
		t.Fatalf("hit header %q", res.Header.Get(sim.HitBlocksHeader))
	}
	text := b.String()
	if strings.HasPrefix(text, "data: ") {
		for _, line := range strings.Split(text, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(d, `"usage"`) {
				text = d
			}
		}
	}
	var out struct{ Usage simUsage }
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		t.Fatalf("decoding %q: %v", text, err)
	}
	return hit, out.Usage
}

const textBody = `{"model":"qwen","messages":[{"role":"system","content":"You are a careful assistant who answers in full sentences."},{"role":"user","content":"Tell me about the history of the printing press in Europe, briefly."}],"cache_salt":"tenant-7"}`

// TestRepeatHitsAndEvents sends one text request twice to a simulator with the test model: the
// first is a miss that publishes one BlockStored batch whose blocks normalize to the request
// side's LocalBlockHashes of the model's own prompt tokens (salted); the second hits every
// complete block (minus one when the prompt is a whole number of blocks), reports cached_tokens
// and publishes nothing. The stream form reports the same.
func TestRepeatHitsAndEvents(t *testing.T) {
	rec := &recorder{}
	pub, err := sim.NewPublisher(&sim.PublisherConfig{WorkerID: "w1", OnPublish: rec.add})
	if err != nil {
		t.Fatal(err)
	}
	s := sim.New(&sim.Config{WorkerID: "w1", Model: "qwen", Frontend: newFrontend(t, &fakeMedia{}, nil), Events: pub})
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	defer http.DefaultClient.CloseIdleConnections()

	m, _ := testkit.Models(t, modelDir)
	_, _, ids := testkit.Prompt(t, m, []byte(textBody))
	nb := len(ids) / 16
	if nb < 2 {
		t.Fatalf("prompt of %d tokens is too short for the test", len(ids))
	}
	want := nb
	if len(ids)%16 == 0 {
		want--
	}

	hit, u := post(t, ts.URL, textBody)
	if hit != 0 || u.PromptTokens != len(ids) || u.PromptTokensDetails.CachedTokens != 0 {
		t.Fatalf("first: hit %d usage %+v, want 0 and %d prompt tokens", hit, u, len(ids))
	}
	msgs := rec.all()
	if len(msgs) != 1 || msgs[0].Seq != 0 {
		t.Fatalf("first request published %d batches", len(msgs))
	}
	ops := decodeAll(t, msgs)
	p, err := blocks.HashPrompt(blocks.Config{BlockSize: 16, ImagePad: 151655, VideoPad: 151656}, blocks.SeedFor("", "tenant-7"), ids, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 1 || len(ops[0].Stored) != nb {
		t.Fatalf("ops %+v", ops)
	}
	for i, h := range p.Hashes() {
		if ops[0].Stored[i].LocalHash != h {
			t.Errorf("block %d: event local hash %016x, request side %016x", i, ops[0].Stored[i].LocalHash, h)
		}
	}

	hit, u = post(t, ts.URL, textBody)
	if hit != want || u.PromptTokensDetails.CachedTokens != want*16 || u.PromptTokens != len(ids) {
		t.Fatalf("second: hit %d usage %+v, want %d blocks", hit, u, want)
	}
	stream := strings.Replace(textBody, `"cache_salt"`, `"stream":true,"stream_options":{"include_usage":true},"cache_salt"`, 1)
	hit, u = post(t, ts.URL, stream)
	if hit != want || u.PromptTokensDetails.CachedTokens != want*16 {
		t.Fatalf("stream: hit %d usage %+v, want %d blocks", hit, u, want)
	}
	if n := len(rec.all()); n != 1 {
		t.Errorf("repeats published %d more batches", n-1)
	}
	// Another salt shares no block.
	hit, _ = post(t, ts.URL, strings.Replace(textBody, "tenant-7", "tenant-8", 1))
	if hit != 0 {
		t.Errorf("other salt hit %d blocks", hit)
	}
}

// TestEvictionEvents runs two different text requests through a simulator whose cache holds one
// block more than the first prompt: the second request's batch removes the least recently used
// blocks of the first (its tail first) before storing its own, and the router's normalizer reads
// those removals as engine hashes the first batch stored.
func TestEvictionEvents(t *testing.T) {
	bodyA := `{"messages":[{"role":"user","content":"` + strings.Repeat("alpha beta gamma delta ", 12) + `"}]}`
	bodyB := `{"messages":[{"role":"user","content":"` + strings.Repeat("one two three four ", 10) + `"}]}`
	m, _ := testkit.Models(t, modelDir)
	blocksOf := func(body string) int {
		_, _, ids := testkit.Prompt(t, m, []byte(body))
		return len(ids) / 16
	}
	na, nb := blocksOf(bodyA), blocksOf(bodyB)
	if nb < 2 || nb > na+1 {
		t.Fatalf("prompts of %d and %d blocks do not fit the test", na, nb)
	}
	rec := &recorder{}
	pub, err := sim.NewPublisher(&sim.PublisherConfig{WorkerID: "w1", OnPublish: rec.add, EventForm: codec.ArrayForm})
	if err != nil {
		t.Fatal(err)
	}
	bc, err := sim.NewBlockCache(&sim.BlockCacheConfig{Capacity: na + 1})
	if err != nil {
		t.Fatal(err)
	}
	s := sim.New(&sim.Config{Model: "qwen", Frontend: newFrontend(t, &fakeMedia{}, nil), Blocks: bc, Events: pub})
	url := newRecorderServer(t, s)
	post(t, url, bodyA)
	post(t, url, bodyB)
	ops := decodeAll(t, rec.all())
	if len(ops) != 3 || ops[0].Type != codec.BlockStored || ops[1].Type != codec.BlockRemoved || ops[2].Type != codec.BlockStored {
		t.Fatalf("ops %+v", ops)
	}
	first, removed := ops[0].Stored, ops[1].Removed
	if len(first) != na || len(ops[2].Stored) != nb || len(removed) != nb-1 || bc.Len() != na+1 {
		t.Fatalf("stored %d, removed %d, stored %d; cache holds %d", len(first), len(removed), len(ops[2].Stored), bc.Len())
	}
	for i, h := range removed {
		if h != first[na-1-i].EngineHash {
			t.Fatalf("removed %d: %x, want block %d of the first chain", i, h, na-1-i)
		}
	}
	// The first chain's surviving prefix is still a hit.
	hit, _ := post(t, url, bodyA)
	if hit != na-(nb-1) {
		t.Fatalf("hit %d after eviction, want %d", hit, na-(nb-1))
	}
}

// TestCompletionsPrompt serves /v1/completions: the string prompt is tokenized without a template
// (as the router does for that path), cached like a chat prompt, and answered as text_completion.
func TestCompletionsPrompt(t *testing.T) {
	s := sim.New(&sim.Config{Model: "qwen", Frontend: newFrontend(t, &fakeMedia{}, nil)})
	url := newRecorderServer(t, s)
	body := `{"model":"qwen","prompt":"` + strings.Repeat("The quick brown fox jumps over the lazy dog. ", 4) + `","max_tokens":2}`
	m, _ := testkit.Models(t, modelDir)
	n := len(m.Tokenizer.Encode(strings.Repeat("The quick brown fox jumps over the lazy dog. ", 4)))
	for i, want := range []int{0, (n - 1) / 16} {
		res, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Object  string
			Choices []struct{ Text string }
			Usage   simUsage
		}
		err = json.NewDecoder(res.Body).Decode(&out)
		res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if res.Header.Get(sim.HitBlocksHeader) != strconv.Itoa(want) || out.Object != "text_completion" || len(out.Choices) != 1 ||
			out.Choices[0].Text != "The cache" || out.Usage.PromptTokens != n || out.Usage.PromptTokensDetails.CachedTokens != want*16 {
			t.Fatalf("request %d: hit %s, %+v", i, res.Header.Get(sim.HitBlocksHeader), out)
		}
	}
}
