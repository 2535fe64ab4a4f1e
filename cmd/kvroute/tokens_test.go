package main

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kvroute/kvroute/routing/model"
	"github.com/kvroute/kvroute/routing/tokenizer"
)

const testModelDir = "../../testdata/golden/qwen3vl-test-model"

// The tests load the same 11 MB tokenizer many times; cache the loads (the command itself loads
// once per run).
func init() {
	var mu sync.Mutex
	models := map[string]*model.Model{}
	toks := map[string]*tokenizer.Tokenizer{}
	realModel, realTok := loadModel, loadTokenizer
	loadModel = func(dir string) (*model.Model, error) {
		mu.Lock()
		defer mu.Unlock()
		if m, ok := models[dir]; ok {
			return m, nil
		}
		m, err := realModel(dir)
		if err == nil {
			models[dir] = m
		}
		return m, err
	}
	loadTokenizer = func(path string) (*tokenizer.Tokenizer, error) {
		mu.Lock()
		defer mu.Unlock()
		if t, ok := toks[path]; ok {
			return t, nil
		}
		t, err := realTok(path)
		if err == nil {
			toks[path] = t
		}
		return t, err
	}
}

// jsonOut encodes v the way main prints it.
func jsonOut(t *testing.T, v any) string {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func TestTokensRequest(t *testing.T) {
	// chat_000 of testdata/golden/chat_template.jsonl and its ids from tokens.jsonl.
	body := `{"messages":[{"role":"user","content":[{"type":"video_url","video_url":{"url":"https://example.com/clip.mp4"}},{"type":"text","text":"Describe this video."}]}],"add_generation_prompt":true}`
	out, err := tokens([]string{"--model", testModelDir}, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"prompt":"<|im_start|>user\n<|vision_start|><|video_pad|><|vision_end|>Describe this video.<|im_end|>\n<|im_start|>assistant\n","token_ids":[151644,872,198,151652,151656,151653,74785,419,2766,13,151645,198,151644,77091,198]}` + "\n"
	if got := jsonOut(t, out); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// --text follows tokens.jsonl (kinds timestamp, special, fragment) on a sample of records.
func TestTokensText(t *testing.T) {
	out, err := tokens([]string{"--model", testModelDir, "--text", "<0.5 seconds>"}, strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := jsonOut(t, out), `{"token_ids":[27,15,13,20,6486,29]}`+"\n"; got != want {
		t.Errorf("got %s want %s", got, want)
	}
	out, err = tokens([]string{"--model", testModelDir, "--text", ""}, strings.NewReader("ignored"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := jsonOut(t, out), `{"token_ids":[]}`+"\n"; got != want {
		t.Errorf("empty text: got %s want %s", got, want)
	}
	data, err := os.ReadFile("../../testdata/golden/tokens.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := loadTokenizer(testModelDir + "/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r struct {
			Kind string          `json:"kind"`
			Text string          `json:"text"`
			IDs  json.RawMessage `json:"ids"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if r.Kind == "special" || r.Kind == "fragment" || (r.Kind == "timestamp" && i%97 == 0) {
			var want []uint32
			if err := json.Unmarshal(r.IDs, &want); err != nil {
				t.Fatal(err)
			}
			if got := textTokens(tok, r.Text).TokenIDs; !slices.Equal(got, want) {
				t.Errorf("%q: got %v want %v", r.Text, got, want)
			}
			n++
		}
	}
	if n < 40 {
		t.Errorf("checked only %d records", n)
	}
}

func TestTokensErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		body string
	}{
		{nil, `{}`},
		{[]string{"--model", testModelDir}, `{"messages":`},
		{[]string{"--model", testModelDir}, `{"messages":[{"role":"user","content":3}]}`},
		{[]string{"--model", testModelDir}, `{"messages":[{"role":"nobody","content":"x"}]}`},
		{[]string{"--model", "/nonexistent"}, `{"messages":[]}`},
		{[]string{"--model", testModelDir, "extra"}, `{}`},
		{[]string{"--bogus"}, `{}`},
	} {
		if _, err := tokens(tc.args, strings.NewReader(tc.body)); err == nil {
			t.Errorf("%v %s: no error", tc.args, tc.body)
		}
	}
}

// TestTokensTextFamilies: `kvroute tokens --model DIR --text TEXT` prints the Hugging Face ids of
// every line of testdata/golden/tokenizers/<F>.jsonl for every family (model folders fetched by
// make deps into testdata/tokenizers/; a missing folder fails).
func TestTokensTextFamilies(t *testing.T) {
	for _, fam := range []string{"llama3", "gemma3", "deepseek_v3", "gptoss", "qwen35_pretok"} {
		t.Run(fam, func(t *testing.T) {
			dir := "../../testdata/tokenizers/" + fam
			if _, err := os.Stat(dir + "/tokenizer.json"); err != nil {
				t.Fatalf("%v: run `make deps` to fetch the tokenizer files", err)
			}
			data, err := os.ReadFile("../../testdata/golden/tokenizers/" + fam + ".jsonl")
			if err != nil {
				t.Fatal(err)
			}
			n, bad := 0, 0
			for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
				var rec struct {
					ID   string   `json:"id"`
					Text string   `json:"text"`
					IDs  []uint32 `json:"ids"`
				}
				if err := json.Unmarshal(line, &rec); err != nil {
					t.Fatal(err)
				}
				n++
				out, err := tokens([]string{"--model", dir, "--text", rec.Text}, strings.NewReader(""))
				if err != nil {
					t.Fatalf("%s: %v", rec.ID, err)
				}
				want := jsonOut(t, textTokensOutput{TokenIDs: rec.IDs})
				if got := jsonOut(t, out); got != want {
					if bad++; bad <= 10 {
						t.Errorf("%s: got %.300s want %.300s", rec.ID, got, want)
					}
				}
			}
			if n < 3000 || bad > 0 {
				t.Errorf("%d of %d lines differ (want all of >3000 lines equal)", bad, n)
			}
		})
	}
}
