package sim_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/internal/sim"
	"github.com/kvroute/kvroute/internal/testkit"
)

func postPath(t *testing.T, url, path, body string) (*http.Response, string) {
	t.Helper()
	res, err := http.Post(url+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

func hitOf(t *testing.T, res *http.Response) int {
	t.Helper()
	h, err := strconv.Atoi(res.Header.Get(sim.HitBlocksHeader))
	if err != nil {
		t.Fatalf("hit header %q", res.Header.Get(sim.HitBlocksHeader))
	}
	return h
}

func commonBlocks(a, b []uint32, bs int) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return min(n, len(a)) / bs
}

// TestResponsesStore: a Responses turn, its previous_response_id follow-up (the prompt is the
// stored conversation plus the new input, as vLLM builds it; the cached tokens are the first
// turn's blocks), GET and DELETE of the stored response, and the 404 of an unknown id.
func TestResponsesStore(t *testing.T) {
	s := sim.New(&sim.Config{WorkerID: "w1", Model: "qwen", Frontend: newFrontend(t, &fakeMedia{}, nil)})
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	defer http.DefaultClient.CloseIdleConnections()
	m, _ := testkit.Models(t, modelDir)

	first := `{"model":"qwen","instructions":"You are a careful assistant who answers in full sentences.","input":"Tell me about the history of the printing press in Europe, briefly."}`
	res, body := postPath(t, ts.URL, "/v1/responses", first)
	if res.StatusCode != 200 {
		t.Fatalf("status %d: %s", res.StatusCode, body)
	}
	var r1 struct {
		ID     string `json:"id"`
		Output []struct {
			Content []struct{ Text string } `json:"content"`
		} `json:"output"`
		Usage struct {
			InputTokens        int `json:"input_tokens"`
			InputTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"input_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(body), &r1); err != nil || r1.ID == "" {
		t.Fatalf("%v: %s", err, body)
	}
	_, _, ids1 := testkit.Prompt(t, m, []byte(`{"model":"qwen","messages":[{"role":"system","content":"You are a careful assistant who answers in full sentences."},{"role":"user","content":"Tell me about the history of the printing press in Europe, briefly."}]}`))
	if r1.Usage.InputTokens != len(ids1) || r1.Usage.InputTokensDetails.CachedTokens != 0 || hitOf(t, res) != 0 {
		t.Fatalf("first turn usage %+v, want %d input tokens, none cached", r1.Usage, len(ids1))
	}
	out := r1.Output[0].Content[0].Text

	follow := `{"model":"qwen","instructions":"You are a careful assistant who answers in full sentences.","previous_response_id":"` + r1.ID + `","input":[{"role":"user","content":"And in Asia?"}],"stream":true}`
	res, body = postPath(t, ts.URL, "/v1/responses", follow)
	if res.StatusCode != 200 || !strings.Contains(body, "event: response.completed") {
		t.Fatalf("status %d: %s", res.StatusCode, body)
	}
	chat2, _ := json.Marshal(map[string]any{"model": "qwen", "messages": []map[string]string{
		{"role": "system", "content": "You are a careful assistant who answers in full sentences."},
		{"role": "user", "content": "Tell me about the history of the printing press in Europe, briefly."},
		{"role": "assistant", "content": out}, {"role": "user", "content": "And in Asia?"}}})
	_, _, ids2 := testkit.Prompt(t, m, chat2)
	var done struct {
		Response struct {
			Usage struct {
				InputTokens        int `json:"input_tokens"`
				InputTokensDetails struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"input_tokens_details"`
			} `json:"usage"`
		} `json:"response"`
	}
	for _, l := range strings.Split(body, "\n") {
		if d, ok := strings.CutPrefix(l, "data: "); ok && strings.Contains(d, `"response.completed"`) {
			if err := json.Unmarshal([]byte(d), &done); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := commonBlocks(ids1, ids2, 16)
	if want == 0 || done.Response.Usage.InputTokens != len(ids2) || done.Response.Usage.InputTokensDetails.CachedTokens != want*16 || hitOf(t, res) != want {
		t.Fatalf("follow-up usage %+v hit %s, want %d input tokens and %d cached blocks", done.Response.Usage, res.Header.Get(sim.HitBlocksHeader), len(ids2), want)
	}

	get, err := http.Get(ts.URL + "/v1/responses/" + r1.ID)
	if err != nil || get.StatusCode != 200 {
		t.Fatalf("GET: %v %v", err, get.StatusCode)
	}
	get.Body.Close()
	req, _ := http.NewRequest(http.MethodDelete, ts.URL+"/v1/responses/"+r1.ID, nil)
	del, err := http.DefaultClient.Do(req)
	if err != nil || del.StatusCode != 200 {
		t.Fatalf("DELETE: %v %v", err, del.StatusCode)
	}
	del.Body.Close()
	if res, _ = postPath(t, ts.URL, "/v1/responses", follow); res.StatusCode != 404 {
		t.Fatalf("follow-up of a deleted response: status %d, want 404", res.StatusCode)
	}
}

// TestMessagesCachedTokens: the same Anthropic request twice, streamed the second time: the
// second reports the first's complete blocks as cache_read_input_tokens.
func TestMessagesCachedTokens(t *testing.T) {
	s := sim.New(&sim.Config{WorkerID: "w1", Model: "qwen", Frontend: newFrontend(t, &fakeMedia{}, nil)})
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	defer http.DefaultClient.CloseIdleConnections()
	m, _ := testkit.Models(t, modelDir)
	body := `{"model":"qwen","max_tokens":8,"system":"You are a careful assistant who answers in full sentences.","messages":[{"role":"user","content":"Tell me about the history of the printing press in Europe, briefly."}]}`
	_, _, ids := testkit.Prompt(t, m, []byte(`{"model":"qwen","messages":[{"role":"system","content":"You are a careful assistant who answers in full sentences."},{"role":"user","content":"Tell me about the history of the printing press in Europe, briefly."}]}`))
	res, b := postPath(t, ts.URL, "/v1/messages", body)
	var r1 struct {
		Usage struct {
			InputTokens int `json:"input_tokens"`
			CacheRead   int `json:"cache_read_input_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(b), &r1); err != nil || res.StatusCode != 200 || r1.Usage.InputTokens != len(ids) || r1.Usage.CacheRead != 0 {
		t.Fatalf("first: %d %s", res.StatusCode, b)
	}
	res, b = postPath(t, ts.URL, "/v1/messages", strings.Replace(body, `"max_tokens":8`, `"max_tokens":8,"stream":true`, 1))
	if res.StatusCode != 200 || !strings.Contains(b, "event: message_stop") {
		t.Fatalf("stream: %d %s", res.StatusCode, b)
	}
	want := len(ids) / 16 * 16
	if !strings.Contains(b, `"cache_read_input_tokens":`+strconv.Itoa(want)) || hitOf(t, res) != len(ids)/16 {
		t.Fatalf("stream usage: want %d cached tokens: %s", want, b)
	}
	res, b = postPath(t, ts.URL, "/v1/messages/count_tokens", `{"model":"qwen","system":"You are a careful assistant who answers in full sentences.","messages":[{"role":"user","content":"Tell me about the history of the printing press in Europe, briefly."}]}`)
	if res.StatusCode != 200 || b != `{"input_tokens":`+strconv.Itoa(len(ids))+`}` {
		t.Fatalf("count_tokens: %d %s", res.StatusCode, b)
	}
}
