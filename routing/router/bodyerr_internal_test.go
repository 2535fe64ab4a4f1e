package router

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/reason"
)

// TestRefusedBodyMessages: a body the parser refuses is answered with what is wrong and where
// (the client reads Message), not with one sentence for every kind of bad body.
func TestRefusedBodyMessages(t *testing.T) {
	r := newTestRouter(t, &fakeMedia{})
	r.cfg.MaxMessages = 2
	cases := []struct {
		name, body string
		code       reason.Code
		message    string
	}{
		{"truncated", `{"messages": [`, reason.BodyInvalid,
			"request body is not one valid JSON object: invalid JSON at byte 14: unexpected end of input"},
		{"top level array", `[1]`, reason.BodyInvalid,
			"request body is not one valid JSON object: invalid JSON: top level is array, not an object"},
		{"trailing data", `{} x`, reason.BodyInvalid,
			"request body is not one valid JSON object: invalid JSON at byte 3: trailing data"},
		// the root object is depth 0, so the 513th '[' (at 5+512) is the first one too deep
		{"nesting", `{"a":` + strings.Repeat("[", 20000), reason.BodyInvalid,
			"request body is not one valid JSON object: invalid JSON at byte 517: nesting deeper than 512"},
		{"too many messages", `{"messages":[{},{},{}]}`, reason.TooManyParts,
			"the request has too many messages or content parts: more than 2 messages (at byte "},
	}
	for _, tc := range cases {
		_, err := r.Route(context.Background(), &Input{Path: "/v1/chat/completions", Body: []byte(tc.body), Workers: testWorkers()})
		var re *reason.Error
		if !errors.As(err, &re) {
			t.Errorf("%s: error %v, want %s", tc.name, err, tc.code)
			continue
		}
		if re.Code != tc.code || !strings.HasPrefix(re.Message, tc.message) {
			t.Errorf("%s: %s %q, want %s with a message starting %q", tc.name, re.Code, re.Message, tc.code, tc.message)
		}
	}
}
