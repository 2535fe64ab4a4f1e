package chat_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/kvroute/kvroute/internal/goldens"
	"github.com/kvroute/kvroute/routing/chat"
)

const goldenDir = "../../testdata/golden/"

type chatCase struct {
	ID            string          `json:"id"`
	Description   string          `json:"description"`
	Request       json.RawMessage `json:"request"`
	TemplateInput struct {
		Messages            json.RawMessage `json:"messages"`
		Tools               json.RawMessage `json:"tools"`
		AddGenerationPrompt bool            `json:"add_generation_prompt"`
	} `json:"template_input"`
	Rendered string `json:"rendered"`
}

func TestGoldenChatTemplate(t *testing.T) {
	tmpl, err := chat.LoadTemplate(goldenDir + "qwen3vl-test-model")
	if err != nil {
		t.Fatal(err)
	}
	lines := goldens.Lines(t, goldenDir+"chat_template.jsonl")
	if len(lines) != 58 {
		t.Fatalf("got %d cases, want 58", len(lines))
	}
	matched := 0
	for _, line := range lines {
		var c chatCase
		if err := json.Unmarshal(line, &c); err != nil {
			t.Fatal(err)
		}
		req, err := chat.ParseRequest(c.Request)
		if err != nil {
			t.Errorf("%s: parse: %v", c.ID, err)
			continue
		}
		got, err := tmpl.Render(req)
		if err != nil {
			t.Errorf("%s (%s): render: %v", c.ID, c.Description, err)
			continue
		}
		if got != c.Rendered {
			t.Errorf("%s (%s):\n got %q\nwant %q", c.ID, c.Description, got, c.Rendered)
			continue
		}
		// The template input as given (already converted) renders the same.
		got2, err := tmpl.RenderInput(chat.Input{Messages: c.TemplateInput.Messages, Tools: c.TemplateInput.Tools,
			AddGenerationPrompt: c.TemplateInput.AddGenerationPrompt, Kwargs: kwargsOf(t, c.Request)})
		if err != nil || got2 != c.Rendered {
			t.Errorf("%s: template_input render: err %v\n got %q\nwant %q", c.ID, err, got2, c.Rendered)
			continue
		}
		matched++
	}
	t.Logf("chat_template.jsonl: %d/%d rendered byte-identical", matched, len(lines))
}

func kwargsOf(t *testing.T, req json.RawMessage) []byte {
	var r struct {
		Kwargs json.RawMessage `json:"chat_template_kwargs"`
	}
	if err := json.Unmarshal(req, &r); err != nil {
		t.Fatal(err)
	}
	return r.Kwargs
}

func TestGoldenChatCasesQwen3(t *testing.T) {
	vl, err := chat.LoadTemplate(goldenDir + "qwen3vl-test-model")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(goldenDir + "qwen3-text-chat-template.jinja")
	if err != nil {
		t.Fatal(err)
	}
	text, err := chat.NewTemplate(string(src), map[string]any{
		"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
	})
	if err != nil {
		t.Fatal(err)
	}
	cases := goldens.Records[goldens.QwenChatCase](t, goldenDir+"chat_cases_qwen3.jsonl")
	if len(cases) != 35 {
		t.Fatalf("got %d cases, want 35", len(cases))
	}
	matched := 0
	for _, c := range cases {
		tmpl := text
		if c.Template == "qwen3vl" {
			tmpl = vl
		}
		got, err := tmpl.RenderInput(chat.Input{Messages: c.Messages, Tools: c.Tools,
			AddGenerationPrompt: c.AddGenerationPrompt, Kwargs: c.Kwargs})
		if err != nil {
			t.Errorf("case %d: render: %v", c.ID, err)
			continue
		}
		if got != c.Rendered {
			t.Errorf("case %d (%s):\n got %q\nwant %q", c.ID, c.Template, got, c.Rendered)
			continue
		}
		matched++
	}
	t.Logf("chat_cases_qwen3.jsonl: %d/%d rendered byte-identical", matched, len(cases))
}
