package integration

import (
	"bytes"
	"strings"
	"testing"
)

// TestBodyParsedOnce checks that with the routing core (model_dir set) the handler leaves JSON
// validation to the core's one parse (issue 14) and bad bodies are still answered 400
// body_invalid, without reaching a worker: broken JSON, trailing data, a top level that is not
// an object, and nesting far beyond the decoder's depth limit.
func TestBodyParsedOnce(t *testing.T) {
	h := startHarness(t, []simSpec{{ID: "once-a", Model: "qwen"}})
	for name, body := range map[string][]byte{
		"truncated":     []byte(`{"model":"qwen","messages":[{"role":"user","content":"hi"}`),
		"trailing data": []byte(`{"model":"qwen","messages":[]} {}`),
		"array":         []byte(`[{"model":"qwen"}]`),
		"bad escape":    []byte(`{"model":"qwen","messages":[{"role":"user","content":"\q"}]}`),
		"deep nesting":  []byte(`{"model":"qwen","x":` + strings.Repeat("[", 1<<20) + strings.Repeat("]", 1<<20) + `}`),
	} {
		before := h.totalRequests()
		a := h.chat(t, body)
		if a.status != 400 || !bytes.Contains(a.body, []byte(`"code":"body_invalid"`)) {
			t.Errorf("%s: status %d body %s, want 400 body_invalid", name, a.status, a.body)
		}
		if h.totalRequests() != before {
			t.Errorf("%s: forwarded to a worker", name)
		}
	}
	ok := h.chat(t, textBody(t, "qwen", "A valid request after the bad ones.\n\"quoted\" \u00e9"))
	ok.mustOK(t)
}
