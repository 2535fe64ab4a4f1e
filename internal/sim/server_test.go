package sim_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kvroute/kvroute/internal/sim"
	"github.com/kvroute/kvroute/internal/testkit/wait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const body = `{"model":"m1","messages":[{"role":"user","content":"one two three"},{"role":"user","content":[{"type":"text","text":"four"},{"type":"image_url","image_url":{"url":"x"}}]}],"max_tokens":3}`

func TestChatJSON(t *testing.T) {
	infos := make(chan sim.RequestInfo, 1)
	s := sim.New(&sim.Config{WorkerID: "w1", Model: "m1", OnRequest: func(i sim.RequestInfo) { infos <- i }})
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("X-Request-Id", "req-1")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out struct {
		ID                string `json:"id"`
		Object            string `json:"object"`
		SystemFingerprint string `json:"system_fingerprint"`
		Choices           []struct {
			Message struct{ Role, Content string }
		}
		Usage struct {
			PromptTokens        int `json:"prompt_tokens"`
			CompletionTokens    int `json:"completion_tokens"`
			PromptTokensDetails struct {
				CachedTokens *int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		}
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	// prompt: "user one two three\nuser four \n" = 6 words
	if res.StatusCode != 200 || out.ID != "chatcmpl-req-1" || out.Object != "chat.completion" || out.SystemFingerprint != "w1" ||
		out.Choices[0].Message.Content != "The cache is" || out.Usage.PromptTokens != 6 || out.Usage.CompletionTokens != 3 ||
		out.Usage.PromptTokensDetails.CachedTokens == nil || *out.Usage.PromptTokensDetails.CachedTokens != 0 {
		t.Errorf("response = %d %+v", res.StatusCode, out)
	}
	info := <-infos
	sum := sha256.Sum256([]byte(body))
	if info.BodySHA256 != hex.EncodeToString(sum[:]) || info.ContentLength != int64(len(body)) || info.RequestID != "req-1" {
		t.Errorf("info = %+v", info)
	}
	if s.Requests() != 1 {
		t.Errorf("requests = %d", s.Requests())
	}
}

func TestChatStream(t *testing.T) {
	s := sim.New(&sim.Config{Model: "m1"})
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	b := strings.Replace(body, `"max_tokens":3`, `"max_tokens":3,"stream":true,"stream_options":{"include_usage":true}`, 1)
	res, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var events []string
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events = append(events, d)
		}
	}
	// 3 tokens, the finish chunk, the usage chunk, [DONE]
	if len(events) != 6 || events[5] != "[DONE]" || !strings.Contains(events[3], `"finish_reason":"length"`) ||
		!strings.Contains(events[4], `"usage":{"prompt_tokens":6,"completion_tokens":3,"total_tokens":9,"prompt_tokens_details":{"cached_tokens":0}}`) {
		t.Errorf("events = %q", events)
	}
}

func TestStreamCancel(t *testing.T) {
	done := make(chan sim.DoneInfo, 1)
	s := sim.New(&sim.Config{Model: "m1", TokenDelay: 50 * time.Millisecond, OnDone: func(_ sim.RequestInfo, d sim.DoneInfo) { done <- d }})
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	ctx, cancel := context.WithCancel(context.Background())
	b := strings.Replace(body, `"max_tokens":3`, `"max_tokens":1000,"stream":true`, 1)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/chat/completions", strings.NewReader(b))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(res.Body)
	if _, err := r.ReadString('\n'); err != nil { // first event arrived
		t.Fatal(err)
	}
	cancel()
	res.Body.Close()
	d := <-done
	if !d.Canceled || d.Tokens >= 1000 {
		t.Errorf("done = %+v", d)
	}
	http.DefaultClient.CloseIdleConnections()
}

func TestModelsAndErrors(t *testing.T) {
	s := sim.New(&sim.Config{Model: "m1"})
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	res, err := http.Get(ts.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var ml struct {
		Data []struct{ ID string }
	}
	_ = json.NewDecoder(res.Body).Decode(&ml)
	res.Body.Close()
	if len(ml.Data) != 1 || ml.Data[0].ID != "m1" {
		t.Errorf("models = %+v", ml)
	}
	for _, c := range []struct {
		body string
		want int
	}{{`{`, 400}, {`{"model":"other","messages":[]}`, 404}} {
		res, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != c.want {
			t.Errorf("%s: status %d, want %d", c.body, res.StatusCode, c.want)
		}
	}
	res, _ = http.Get(ts.URL + "/health")
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("health %d", res.StatusCode)
	}
	http.DefaultClient.CloseIdleConnections()
}

// TestMaxRunningQueues: with MaxRunning 1 a second request waits until the first finished its
// decode, and is then answered in full.
func TestMaxRunningQueues(t *testing.T) {
	s := sim.New(&sim.Config{WorkerID: "w1", Model: "m1", MaxRunning: 1, TokenDelay: 20 * time.Millisecond})
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	const streamBody = `{"model":"m1","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
	first, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(streamBody))
	if err != nil {
		t.Fatal(err)
	}
	defer first.Body.Close()
	if _, err := bufio.NewReader(first.Body).ReadString('\n'); err != nil { // the first chunk: running
		t.Fatal(err)
	}
	second := make(chan int, 1)
	go func() {
		res, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			second <- -1
			return
		}
		res.Body.Close()
		second <- res.StatusCode
	}()
	wait.For(t, "second request waiting for a running slot", func() bool { return s.Waiting() == 1 })
	if s.Active() != 2 {
		t.Errorf("Active = %d, want 2", s.Active())
	}
	_, _ = io.Copy(io.Discard, first.Body) // the first completes its decode and frees the slot
	if code := <-second; code != 200 {
		t.Errorf("second request: status %d", code)
	}
	if s.Waiting() != 0 {
		t.Errorf("Waiting = %d after both finished", s.Waiting())
	}
}
