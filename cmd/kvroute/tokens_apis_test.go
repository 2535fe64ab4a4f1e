package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/internal/goldens"
	"github.com/kvroute/kvroute/routing/apis"
)

// TestTokensAPIPaths: `tokens --path /v1/messages|/v1/responses` prints for a golden request what
// it prints for the chat form vLLM builds from it (testdata/golden/apis), under each server
// setting the vector has.
func TestTokensAPIPaths(t *testing.T) {
	for _, c := range []struct {
		file, path, id, key string
		args                []string
	}{
		{"anthropic_to_chat.jsonl", "/v1/messages", "anth-065", "expected", nil},
		{"anthropic_to_chat.jsonl", "/v1/messages", "anth-065", "expected_fold", []string{"--anthropic-inline-system", "fold"}},
		{"anthropic_to_chat.jsonl", "/v1/messages", "anth-051", "expected_if_disabled_effort_low", []string{"--anthropic-disabled-thinking-effort", "low"}},
		{"responses_to_chat.jsonl", "/v1/responses", "resp-021", "expected", nil},
		{"responses_to_chat.jsonl", "/v1/responses", "resp-049", "expected", nil},
	} {
		var vec map[string]json.RawMessage
		for _, l := range goldens.Lines(t, "../../testdata/golden/apis/"+c.file) {
			if bytes.Contains(l, []byte(`"id": "`+c.id+`"`)) {
				if err := json.Unmarshal(l, &vec); err != nil {
					t.Fatal(err)
				}
			}
		}
		if vec == nil || vec[c.key] == nil {
			t.Fatalf("%s %s not in %s", c.id, c.key, c.file)
		}
		got, err := tokens(append([]string{"--model", testModelDir, "--path", c.path}, c.args...), bytes.NewReader(vec["input"]))
		if err != nil {
			t.Fatalf("%s: %v", c.id, err)
		}
		exp, err := apis.Parse(vec[c.key])
		if err != nil {
			t.Fatal(err)
		}
		want, err := tokens([]string{"--model", testModelDir}, bytes.NewReader(apis.FormFromExpected("test-model", exp).Body()))
		if err != nil {
			t.Fatal(err)
		}
		if g, w := jsonOut(t, got), jsonOut(t, want); g != w || !strings.Contains(g, `"token_ids":[151644`) {
			t.Errorf("%s (%s): got  %.300s\nwant %.300s", c.id, c.key, g, w)
		}
	}
	// the default settings give the preserve form, which differs from the fold form here
	a, _ := tokens([]string{"--model", testModelDir, "--path", "/v1/messages"}, strings.NewReader(`{"model":"m","max_tokens":9,"system":"S.","messages":[{"role":"user","content":"Q"},{"role":"system","content":"N."}]}`))
	b, _ := tokens([]string{"--model", testModelDir, "--path", "/v1/messages", "--anthropic-inline-system", "fold"}, strings.NewReader(`{"model":"m","max_tokens":9,"system":"S.","messages":[{"role":"user","content":"Q"},{"role":"system","content":"N."}]}`))
	if jsonOut(t, a) == jsonOut(t, b) {
		t.Fatal("preserve and fold printed the same prompt")
	}
}
