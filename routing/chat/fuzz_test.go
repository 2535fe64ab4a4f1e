package chat_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"runtime"
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
		// Under limits, the same body is accepted or refused alike (skipped top-level members
		// are checked as strictly), and the parts the router reads are the same. Over a limit
		// the decoder stops at once: the rest of the body is not checked (both answers are 400).
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		lr, lerr := chat.ParseRequestLimited(body, chat.Limits{MaxMessages: 4, MaxParts: 4})
		runtime.ReadMemStats(&after)
		// At most 128 values are built (16 per allowed message and part); their strings are
		// copies of body bytes (escaped ones decoded by encoding/json).
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<10+8*uint64(len(body)) {
			t.Fatalf("ParseRequestLimited of %d bytes allocated %d bytes", len(body), alloc)
		}
		switch {
		case errors.Is(lerr, chat.ErrTooManyParts): // stopped at the limit; the rest is not checked
		case (lerr == nil) != (err == nil):
			t.Fatalf("ParseRequestLimited err %v, ParseRequest err %v for %q", lerr, err, body)
		case err == nil && (len(lr.Media) != len(r.Media) || lr.Model != r.Model || (lr.SchemaErr == nil) != (r.SchemaErr == nil)):
			t.Fatalf("ParseRequestLimited read %d media, model %q, schema %v; ParseRequest %d, %q, %v for %q",
				len(lr.Media), lr.Model, lr.SchemaErr, len(r.Media), r.Model, r.SchemaErr, body)
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
