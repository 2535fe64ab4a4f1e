package model_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/kvroute/kvroute/internal/goldens"
	"github.com/kvroute/kvroute/routing/chat"
	"github.com/kvroute/kvroute/routing/layout"
	"github.com/kvroute/kvroute/routing/model"
)

const goldenDir = "../../testdata/golden/"

var (
	loadOnce sync.Once
	loaded   *model.Model
	loadErr  error
)

// testModel loads the golden Qwen3-VL test model once per test binary.
func testModel(t testing.TB) *model.Model {
	t.Helper()
	loadOnce.Do(func() { loaded, loadErr = model.Load(goldenDir + "qwen3vl-test-model") })
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	return loaded
}

func TestLoad(t *testing.T) {
	m := testModel(t)
	want := layout.TokenIDs{VisionStart: 151652, VisionEnd: 151653, ImagePad: 151655, VideoPad: 151656}
	if !m.Vision || m.TokenIDs != want {
		t.Errorf("token ids %+v (vision %v), want %+v", m.TokenIDs, m.Vision, want)
	}
	if m.Template == nil || filepath.Base(m.Template.File) != "chat_template.jinja" {
		t.Errorf("template not loaded from chat_template.jinja: %+v", m.Template)
	}
	if _, err := model.Load(t.TempDir()); err == nil {
		t.Errorf("loading a directory without tokenizer.json succeeded")
	}
}

// Every chat case of chat_template.jsonl: the request renders and tokenizes to the ids of
// tokens.jsonl (kind chat_prompt, source = the chat case).
func TestGoldenChatPromptTokens(t *testing.T) {
	m := testModel(t)
	want := map[string][]uint32{}
	for _, line := range goldens.Lines(t, goldenDir+"tokens.jsonl") {
		var r struct {
			Kind   string          `json:"kind"`
			Source json.RawMessage `json:"source"`
			Text   string          `json:"text"`
			IDs    json.RawMessage `json:"ids"`
		}
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		if r.Kind != "chat_prompt" {
			continue
		}
		var src string
		var ids []uint32
		if err := json.Unmarshal(r.Source, &src); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(r.IDs, &ids); err != nil {
			t.Fatal(err)
		}
		want[src] = ids
	}
	if len(want) != 58 {
		t.Fatalf("got %d chat_prompt records, want 58", len(want))
	}
	matched := 0
	for _, line := range goldens.Lines(t, goldenDir+"chat_template.jsonl") {
		var c struct {
			ID       string          `json:"id"`
			Request  json.RawMessage `json:"request"`
			Rendered string          `json:"rendered"`
		}
		if err := json.Unmarshal(line, &c); err != nil {
			t.Fatal(err)
		}
		req, err := chat.ParseRequest(c.Request)
		if err != nil {
			t.Fatal(err)
		}
		prompt, ids, err := m.PromptTokens(req)
		if err != nil {
			t.Errorf("%s: %v", c.ID, err)
			continue
		}
		if prompt != c.Rendered {
			t.Errorf("%s: prompt differs", c.ID)
			continue
		}
		if !slices.Equal(ids, want[c.ID]) {
			t.Errorf("%s: ids\n got %v\nwant %v", c.ID, ids, want[c.ID])
			continue
		}
		matched++
	}
	t.Logf("tokens.jsonl chat_prompt: %d/%d token ids identical", matched, len(want))
}

// Every case of chat_cases_qwen3.jsonl: rendered and tokenized ids identical.
func TestGoldenChatCasesQwen3Tokens(t *testing.T) {
	m := testModel(t)
	src, err := os.ReadFile(goldenDir + "qwen3-text-chat-template.jinja")
	if err != nil {
		t.Fatal(err)
	}
	text, err := chat.NewTemplate(string(src), map[string]any{"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"})
	if err != nil {
		t.Fatal(err)
	}
	cases := goldens.Records[goldens.QwenChatCase](t, goldenDir+"chat_cases_qwen3.jsonl")
	matched := 0
	for _, c := range cases {
		tmpl := text
		if c.Template == "qwen3vl" {
			tmpl = m.Template
		}
		got, err := tmpl.RenderInput(chat.Input{Messages: c.Messages, Tools: c.Tools, AddGenerationPrompt: c.AddGenerationPrompt, Kwargs: c.Kwargs})
		if err != nil || got != c.Rendered {
			t.Errorf("case %d: render err %v", c.ID, err)
			continue
		}
		if ids := m.Tokenizer.Encode(got); !slices.Equal(ids, c.IDs) {
			t.Errorf("case %d: ids\n got %v\nwant %v", c.ID, ids, c.IDs)
			continue
		}
		matched++
	}
	t.Logf("chat_cases_qwen3.jsonl: %d/%d token ids identical", matched, len(cases))
}

func TestPromptTokensCompletionsAndErrors(t *testing.T) {
	m := testModel(t)
	req, err := chat.ParseRequest([]byte(`{"model":"m","prompt":"<|im_start|>user\nhi<|im_end|>"}`))
	if err != nil {
		t.Fatal(err)
	}
	prompt, ids, err := m.PromptTokens(req)
	if err != nil || prompt != "<|im_start|>user\nhi<|im_end|>" || !slices.Equal(ids, []uint32{151644, 872, 198, 6023, 151645}) {
		t.Errorf("completions prompt: %q %v %v", prompt, ids, err)
	}
	req, _ = chat.ParseRequest([]byte(`{"messages":[{"role":"user","content":7}]}`))
	if _, _, err := m.PromptTokens(req); !errors.Is(err, chat.ErrSchema) {
		t.Errorf("schema error: %v", err)
	}
	req, _ = chat.ParseRequest([]byte(`{"messages":[{"role":"oracle","content":"x"}]}`))
	if _, _, err := m.PromptTokens(req); !errors.Is(err, chat.ErrRender) {
		t.Errorf("render error: %v", err)
	}
}
