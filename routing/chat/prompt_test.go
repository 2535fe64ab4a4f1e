package chat

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestPromptForms: the /v1/completions prompt forms vLLM's CompletionRequest accepts, read as
// the one prompt the worker prefills; batches of several prompts and malformed ids are schema
// errors (routed on load alone, forwarded unchanged).
func TestPromptForms(t *testing.T) {
	cases := []struct {
		body    string
		prompt  string
		ids     []uint32
		wantErr string
	}{
		{`{"prompt":"hello"}`, "hello", nil, ""},
		{`{"prompt":["hello"]}`, "hello", nil, ""},
		{`{"prompt":[1,2,4294967295]}`, "", []uint32{1, 2, 4294967295}, ""},
		{`{"prompt":[[7,0,9]]}`, "", []uint32{7, 0, 9}, ""},
		{`{"prompt":["a","b"]}`, "", nil, "a batch of 2 prompts"},
		{`{"prompt":[[1],[2]]}`, "", nil, "a batch of 2 prompts"},
		{`{"prompt":[]}`, "", nil, "empty list"},
		{`{"prompt":[[]]}`, "", nil, "prompt[0] is an empty list"},
		{`{"prompt":[1.5]}`, "", nil, "element 0 (1.5) is not a token id"},
		{`{"prompt":[-1]}`, "", nil, "element 0 (-1) is not a token id"},
		{`{"prompt":[4294967296]}`, "", nil, "element 0 (4294967296) is not a token id"},
		{`{"prompt":[1e3]}`, "", nil, "element 0 (1e3) is not a token id"},
		{`{"prompt":[1,"a"]}`, "", nil, "element 1 is string"},
		{`{"prompt":{"x":1}}`, "", nil, "not a string or a list"},
		{`{"prompt":[null]}`, "", nil, "prompt[0] is null"},
	}
	for _, c := range cases {
		req, err := ParseRequest([]byte(c.body))
		if err != nil {
			t.Fatalf("%s: %v", c.body, err)
		}
		if !req.HasPrompt {
			t.Errorf("%s: HasPrompt false", c.body)
		}
		if c.wantErr != "" {
			if req.SchemaErr == nil || !errors.Is(req.SchemaErr, ErrSchema) || !strings.Contains(req.SchemaErr.Error(), c.wantErr) {
				t.Errorf("%s: schema error %v, want one containing %q", c.body, req.SchemaErr, c.wantErr)
			}
			continue
		}
		if req.SchemaErr != nil || req.Prompt != c.prompt || !slices.Equal(req.PromptIDs, c.ids) {
			t.Errorf("%s: prompt %q ids %v err %v; want %q %v", c.body, req.Prompt, req.PromptIDs, req.SchemaErr, c.prompt, c.ids)
		}
	}
}
