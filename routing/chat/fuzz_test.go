package chat_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/routing/chat"
)

// FuzzParseRequest: ParseRequest never panics, fails exactly when the body is not one JSON
// object, and its media offsets always point at objects whose splice keeps the body valid.
func FuzzParseRequest(f *testing.F) {
	f.Add([]byte(mediaBody))
	f.Add([]byte(`{"messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"video_url","video_url":{"url":"a"}},{"video_url":"b","uuid":1}]}]}`))
	f.Add([]byte(`{"a":"\ud800","b":-0.0e+5,"c":[[[]]],"d":{"":null}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := chat.ParseRequest(body)
		trimmed := bytes.TrimSpace(body)
		isObject := json.Valid(body) && len(trimmed) > 0 && trimmed[0] == '{'
		if (err == nil) != isObject {
			t.Fatalf("err %v but json.Valid-object %v for %q", err, isObject, body)
		}
		if err != nil {
			return
		}
		uuids := make([]string, len(r.Media))
		for i := range uuids {
			uuids[i] = strings.Repeat("ab", i+1)
		}
		out := chat.SpliceUUIDs(r.Raw, r.Media, uuids)
		if !json.Valid(out) {
			t.Fatalf("splice made invalid JSON from %q: %q", body, out)
		}
		r2, err := chat.ParseRequest(out)
		if err != nil || len(r2.Media) != len(r.Media) {
			t.Fatalf("reparse after splice: %v, %d media (had %d)", err, len(r2.Media), len(r.Media))
		}
		for i, m := range r2.Media {
			if r.Media[i].NoSplice {
				if m.HasUUID != r.Media[i].HasUUID {
					t.Fatalf("NoSplice media %d was spliced", i)
				}
				continue
			}
			if m.UUID != uuids[i] || m.Kind != r.Media[i].Kind {
				t.Fatalf("media %d after splice: %+v, want uuid %q and kind %v", i, m, uuids[i], r.Media[i].Kind)
			}
		}
	})
}

// FuzzTemplate: compiling and rendering arbitrary template sources never panics.
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{"{% for m in messages %}{{ m.role }}\n{% endfor %}", "{%- raw -%}{{ x }}{% endraw %}", "{{ '}}' }}{# c #}", "{ {%+ if true -%} a {%- endif +%}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		tmpl, err := chat.NewTemplate(src, nil)
		if err != nil {
			return
		}
		_, _ = tmpl.RenderInput(chat.Input{Messages: []byte(`[{"role":"user","content":"x"}]`)})
	})
}
