package apis

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/internal/goldens"
	"github.com/kvroute/kvroute/internal/testkit/memtest"
)

// The converter's cached path (convert_fast.go) must give the full path's bytes: every golden
// vector, cold and warm, under each server setting; conversations that grow turn by turn from a
// small pool of items, so that the same item text recurs after different items (merged into the
// assistant message before it, or not); the same text as a Responses item and as an Anthropic
// message. Requests vLLM refuses must give the full path's error.

type goldenVec struct {
	ID       string          `json:"id"`
	Input    json.RawMessage `json:"input"`
	Expected json.RawMessage `json:"expected"`
}

func goldenInputs(t *testing.T, file string) []goldenVec {
	var out []goldenVec
	for _, l := range goldens.Lines(t, "../../testdata/golden/apis/"+file) {
		var v goldenVec
		if err := json.Unmarshal(l, &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// fullResponses is the full path: FromResponses and Body.
func fullResponses(body []byte, opt ResponsesOptions) (*Responses, []byte, error) {
	rr, err := FromResponses(body, opt)
	if err != nil {
		return rr, nil, err
	}
	return rr, rr.Form.Body(), nil
}

func fullAnthropic(body []byte, opt AnthropicOptions) ([]byte, error) {
	f, err := FromAnthropic(body, opt)
	if err != nil {
		return nil, err
	}
	return f.Body(), nil
}

func sameErr(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Error() == b.Error()
}

// checkResponses converts body with c and with the full path and compares everything; it
// reports whether the cached path took the body.
func checkResponses(t *testing.T, c *Converter, id string, body []byte, opt ResponsesOptions) bool {
	t.Helper()
	wantR, want, wantErr := fullResponses(body, opt)
	_, _, cached := c.responsesCached(body, opt)
	gotR, got, gotErr := c.ResponsesChat(body, opt)
	if !sameErr(gotErr, wantErr) {
		t.Fatalf("%s: error %v, want %v", id, gotErr, wantErr)
	}
	if (gotR == nil) != (wantR == nil) || gotR != nil && (gotR.PreviousResponseID != wantR.PreviousResponseID || gotR.Store != wantR.Store) {
		t.Fatalf("%s: fields %+v, want %+v", id, gotR, wantR)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: chat body\n got %s\nwant %s", id, got, want)
	}
	if cached && wantErr != nil {
		t.Fatalf("%s: the cached path took a request vLLM refuses (%v)", id, wantErr)
	}
	return cached
}

func checkAnthropic(t *testing.T, c *Converter, id string, body []byte, opt AnthropicOptions) bool {
	t.Helper()
	want, wantErr := fullAnthropic(body, opt)
	_, cached := c.anthropicCached(body, opt)
	got, gotErr := c.AnthropicChat(body, opt)
	if !sameErr(gotErr, wantErr) {
		t.Fatalf("%s: error %v, want %v", id, gotErr, wantErr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: chat body\n got %s\nwant %s", id, got, want)
	}
	if cached && wantErr != nil {
		t.Fatalf("%s: the cached path took a request vLLM refuses (%v)", id, wantErr)
	}
	return cached
}

func TestConverterGolden(t *testing.T) {
	c := NewConverter(64 << 20)
	resp, anth := goldenInputs(t, "responses_to_chat.jsonl"), goldenInputs(t, "anthropic_to_chat.jsonl")
	var cachedR, cachedA, n int
	for pass := 0; pass < 3; pass++ { // cold, then warm twice
		for _, v := range resp {
			for _, opt := range []ResponsesOptions{{}, {StoreEnabled: true}} {
				if checkResponses(t, c, v.ID, v.Input, opt) && pass == 0 && !opt.StoreEnabled {
					cachedR++
				}
			}
		}
		for _, v := range anth {
			for _, opt := range []AnthropicOptions{{}, {InlineSystem: "fold"}, {DisabledThinkingEffort: "low"}} {
				if checkAnthropic(t, c, v.ID, v.Input, opt) && pass == 0 && opt == (AnthropicOptions{}) {
					cachedA++
				}
			}
		}
		n++
	}
	// The cached path takes most vectors (the others: errors, string input, inline system
	// messages, id-less tool_use, passed-through item types).
	t.Logf("cached path: %d of %d Responses vectors, %d of %d Anthropic vectors", cachedR, len(resp), cachedA, len(anth))
	if len(resp) < 100 || len(anth) < 100 || cachedR < 60 || cachedA < 60 {
		t.Fatalf("cached path took %d of %d Responses and %d of %d Anthropic vectors: fewer than it should", cachedR, len(resp), cachedA, len(anth))
	}
	if st := c.Stats(); st.Hits == 0 {
		t.Fatalf("no cache hits after %d passes: %+v", n, st)
	}
}

// respPool are Responses items whose order changes what merges: an assistant output message, a
// reasoning item and function calls merge into the assistant message before them.
var respPool = []string{
	`{"role":"user","content":"Read the file, please."}`,
	`{"role":"user","content":[{"type":"input_text","text":"and this \"one\"\n"}]}`,
	`{"type":"message","role":"user","content":[{"type":"input_text","text":"typed"}],"status":"completed"}`,
	`{"role":"developer","content":"Be brief."}`,
	`{"role":"assistant","content":"Sure."}`,
	`{"type":"message","role":"assistant","status":"completed","id":"msg_1","content":[{"type":"output_text","text":"Looking.","annotations":[]}]}`,
	`{"type":"function_call","call_id":"call_1","name":"read_file","arguments":"{\"path\":\"a.go\"}"}`,
	`{"type":"function_call","call_id":"call_2","name":"grep","arguments":"{}","namespace":"fs"}`,
	`{"type":"function_call_output","call_id":"call_1","output":"package main\n"}`,
	`{"type":"function_call_output","call_id":"call_2","output":"no match ✓ \u2028"}`,
	`{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"think"}]}`,
	`{"type":"reasoning","id":"rs_2","summary":[],"content":[{"type":"reasoning_text","text":"deeper"}]}`,
	`{ "role" : "user" , "content" : "spaced" }`,
}

// respLast are endings that decide continue_final_message.
var respLast = []string{
	`{"type":"message","role":"assistant","status":"in_progress","id":"msg_2","content":[{"type":"output_text","text":"Partial","annotations":[]}]}`,
	`{"type":"reasoning","id":"rs_3","status":"incomplete","summary":[{"type":"summary_text","text":"half"}]}`,
}

func TestConverterGrowingResponses(t *testing.T) {
	c := NewConverter(64 << 20)
	rng := rand.New(rand.NewPCG(25, 1))
	taken := 0
	for conv := 0; conv < 60; conv++ {
		var items []string
		head := `"model":"m","instructions":"Be exact.","tools":[{"type":"function","name":"read_file","parameters":{"type":"object"}}],`
		if conv%3 == 1 {
			head = `"model":"m","reasoning":{"effort":"low"},`
		}
		for turn := 0; turn < 12; turn++ {
			for k := rng.IntN(4); k >= 0; k-- {
				items = append(items, respPool[rng.IntN(len(respPool))])
			}
			in := items
			if rng.IntN(5) == 0 {
				in = append(append([]string{}, items...), respLast[rng.IntN(len(respLast))])
			}
			body := []byte("{" + head + `"input":[` + strings.Join(in, ",") + "]}")
			if checkResponses(t, c, fmt.Sprintf("conv %d turn %d", conv, turn), body, ResponsesOptions{}) {
				taken++
			}
		}
	}
	if taken != 60*12 {
		t.Fatalf("cached path took %d of %d turns", taken, 60*12)
	}
}

var anthPool = []string{
	`{"role":"user","content":"Fix the bug."}`,
	`{"role":"user","content":[{"type":"text","text":"see"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]}`,
	`{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"s"},{"type":"text","text":"Reading."},{"type":"tool_use","id":"toolu_1","name":"read_file","input":{"path":"a.go","n":1.5e3}}]}`,
	`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"package main"},{"type":"image","source":{"type":"url","url":"http://x/a.png"}}]}]}`,
	`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"ok ✓"},{"type":"text","text":"next"}]}`,
	`{"role":"assistant","content":"Done."}`,
	`{"role":"assistant","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"odd"}]}]}`,
	`{ "role" : "user" , "content" : [ ] }`,
}

func TestConverterGrowingAnthropic(t *testing.T) {
	c := NewConverter(64 << 20)
	rng := rand.New(rand.NewPCG(25, 2))
	taken := 0
	for conv := 0; conv < 60; conv++ {
		var msgs []string
		head := `"model":"m","max_tokens":8,"system":[{"type":"text","text":"Be exact."}],"tools":[{"name":"read_file","input_schema":{"properties":{}}}],`
		if conv%2 == 1 {
			head = `"model":"m","max_tokens":8,"thinking":{"type":"disabled"},`
		}
		for turn := 0; turn < 12; turn++ {
			for k := rng.IntN(3); k >= 0; k-- {
				msgs = append(msgs, anthPool[rng.IntN(len(anthPool))])
			}
			body := []byte("{" + head + `"messages":[` + strings.Join(msgs, ",") + "]}")
			for _, opt := range []AnthropicOptions{{}, {InlineSystem: "fold", DisabledThinkingEffort: "low"}} {
				if checkAnthropic(t, c, fmt.Sprintf("conv %d turn %d", conv, turn), body, opt) {
					taken++
				}
			}
		}
	}
	if taken != 60*12*2 {
		t.Fatalf("cached path took %d of %d turns", taken, 60*12*2)
	}
}

// TestConverterKeySpaces: one JSON text converted as a Responses item and as an Anthropic message
// (their entries must not answer for each other), and the full path for what the cached one does
// not take (an inline system message, an id-less tool_use, an item type passed through, a
// repeated list key, invalid JSON inside an item).
func TestConverterKeySpaces(t *testing.T) {
	c := NewConverter(64 << 20)
	msg := `{"role":"user","content":"same text"}`
	for i := 0; i < 2; i++ {
		if !checkResponses(t, c, "responses", []byte(`{"model":"m","input":[`+msg+`]}`), ResponsesOptions{}) {
			t.Fatal("cached path did not take a plain Responses request")
		}
		if !checkAnthropic(t, c, "anthropic", []byte(`{"model":"m","max_tokens":1,"messages":[`+msg+`]}`), AnthropicOptions{}) {
			t.Fatal("cached path did not take a plain Messages request")
		}
	}
	for _, b := range []string{
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"a"},{"role":"system","content":"s"}]}`,
		`{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","name":"f","input":{}}]}]}`,
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"a"}],"messages":[{"role":"user","content":"b"}]}`,
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"a}]}`,
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"a"}] x`,
	} {
		if checkAnthropic(t, c, b, []byte(b), AnthropicOptions{}) {
			t.Fatalf("cached path took %s", b)
		}
	}
	for _, b := range []string{
		`{"model":"m","input":[{"type":"item_reference","id":"x"}]}`,
		`{"model":"m","input":"text"}`,
		`{"model":"m","input":[{"role":"user","content":"a"}],"input":[]}`,
		`{"model":"m","input":[{"role":"tool","content":"a"}]}`,
		`{"model":"m","input":[{"role":"user","content":"a\u00"}]}`,
	} {
		if checkResponses(t, c, b, []byte(b), ResponsesOptions{}) {
			t.Fatalf("cached path took %s", b)
		}
	}
}

// TestConverterMemoryBound: the cache stays within its budget on the live heap: 120 distinct
// ~150 kB conversations through a 4 MiB converter (18 MB of bodies, all cached if nothing were
// evicted) leave at most a few budgets on the heap after GC, and every one converts as the full
// path does.
func TestConverterMemoryBound(t *testing.T) {
	const budget = 4 << 20
	c := NewConverter(budget)
	base := memtest.LiveHeap()
	total := 0
	for conv := 0; conv < 120; conv++ {
		var items []string
		for i := 0; i < 20; i++ {
			items = append(items, fmt.Sprintf(`{"role":"user","content":"conversation %d turn %d %s"}`, conv, i, strings.Repeat("word ", 1500)),
				fmt.Sprintf(`{"type":"function_call","call_id":"c%d","name":"f","arguments":"{}"}`, i))
		}
		body := []byte(`{"model":"m","input":[` + strings.Join(items, ",") + "]}")
		total += len(body)
		if !checkResponses(t, c, fmt.Sprint("conversation ", conv), body, ResponsesOptions{}) {
			t.Fatalf("conversation %d: cached path not taken", conv)
		}
	}
	grown := memtest.LiveHeap() - base
	if st := c.Stats(); st.Bytes > budget || grown > 3*budget {
		t.Fatalf("after %d MB of bodies: %d bytes charged, live heap grew %d bytes; budget %d", total>>20, st.Bytes, grown, budget)
	}
	runtime.KeepAlive(c)
}

// TestConverterConcurrent: goroutines converting the same growing conversations through one
// converter (run with -race: cached items are shared read-only, the conversion's merges write
// only values of their own request) get the full path's bytes.
func TestConverterConcurrent(t *testing.T) {
	c := NewConverter(64 << 20)
	var bodies [][]byte
	var want [][]byte
	var items []string
	for turn := 0; turn < 30; turn++ {
		items = append(items, respPool[turn%len(respPool)], respPool[(turn*7+3)%len(respPool)])
		b := []byte(`{"model":"m","instructions":"x","input":[` + strings.Join(items, ",") + "]}")
		_, w, err := fullResponses(b, ResponsesOptions{})
		if err != nil {
			t.Fatal(err)
		}
		bodies, want = append(bodies, b), append(want, w)
	}
	errs := make(chan string, 4)
	for g := 0; g < 4; g++ {
		go func() {
			for round := 0; round < 3; round++ {
				for i, b := range bodies {
					_, got, err := c.ResponsesChat(b, ResponsesOptions{})
					if err != nil || !bytes.Equal(got, want[i]) {
						errs <- fmt.Sprintf("turn %d: %v\n got %s\nwant %s", i, err, got, want[i])
						return
					}
					ReleaseChatBody(got)
				}
			}
			errs <- ""
		}()
	}
	for g := 0; g < 4; g++ {
		if e := <-errs; e != "" {
			t.Fatal(e)
		}
	}
}

// TestRunStarts: the runs runStarts finds are the messages messageFromItem makes, on random
// sequences of every item kind the cached path takes (a rule of messageFromItem that runStarts
// does not follow fails here, before any cache is involved).
func TestRunStarts(t *testing.T) {
	pool := append(append([]string{}, respPool...), respLast...)
	rng := rand.New(rand.NewPCG(25, 2))
	for n := 0; n < 2000; n++ {
		var vs []*Value
		for k := rng.IntN(12); k >= 0; k-- {
			v, err := parseItem([]byte(pool[rng.IntN(len(pool))]))
			if err != nil {
				t.Fatal(err)
			}
			vs = append(vs, v)
		}
		items, err := normalizeItems(vs)
		if err != nil {
			t.Fatal(err)
		}
		var msgs []*Value
		var want []int
		for i, it := range items {
			if m := messageFromItem(it, msgs); m != nil {
				msgs = append(msgs, m)
				want = append(want, i)
			}
		}
		if got := runStarts(items, nil); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("sequence %d: runStarts %v, messageFromItem starts %v", n, got, want)
		}
	}
}
