package chat_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/internal/goldens"
	"github.com/kvroute/kvroute/routing/chat"
)

// requestFacts is everything ParseRequestLimited gives a caller, as comparable text (the
// unexported tree is compared through what renders from it).
func requestFacts(r *chat.Request, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	asp := "<nil>"
	if r.AddSpecialTokens != nil {
		asp = fmt.Sprint(*r.AddSpecialTokens)
	}
	return fmt.Sprintf("model=%q stream=%v agp=%v cfm=%v asp=%s effort=%q salt=%q mmkw=%v audio=%v adj=%v uuid=%v media=%+v prompt=%q ids=%v hasPrompt=%v hasMsgs=%v schema=%v",
		r.Model, r.Stream, r.AddGenerationPrompt, r.ContinueFinalMessage, asp, r.ReasoningEffort, r.CacheSalt, r.MMProcessorKwargs,
		r.HasAudio, r.AdjacentVideos, r.ClientUUID, r.Media, r.Prompt, r.PromptIDs, r.HasPrompt, r.HasMessages, r.SchemaErr)
}

// checkCachedParse parses body with and without the message cache (under lim) and renders both
// with and without the template cache: every fact, error and prompt must be equal.
func checkCachedParse(t *testing.T, tmpl, plain *chat.Template, mc *chat.MessageCache, body []byte, lim chat.Limits) {
	t.Helper()
	want, wantErr := chat.ParseRequestLimited(body, lim)
	lim.Messages = mc
	got, gotErr := chat.ParseRequestLimited(body, lim)
	if g, w := requestFacts(got, gotErr), requestFacts(want, wantErr); g != w {
		t.Fatalf("body %q:\ncached   %s\nuncached %s", body, g, w)
	}
	if wantErr != nil {
		return
	}
	wp, wpErr := plain.Render(want)
	gp, gpErr := tmpl.Render(got)
	if gp != wp || fmt.Sprint(gpErr) != fmt.Sprint(wpErr) {
		t.Fatalf("body %q:\ncached render %q (%v)\nuncached     %q (%v)", body, gp, gpErr, wp, wpErr)
	}
}

// TestCachedParseShiftedBodies: a conversation's messages arrive again in bodies where they sit
// at other byte offsets (a longer model name, other members first, whitespace), with media
// parts whose offsets the splice of uuids uses; the cached parse must give the same facts,
// offsets included, and the same prompt as an uncached one, on the golden requests too.
func TestCachedParseShiftedBodies(t *testing.T) {
	tmpl, err := chat.LoadTemplate(goldenDir + "qwen3vl-test-model")
	if err != nil {
		t.Fatal(err)
	}
	plain, err := chat.LoadTemplate(goldenDir + "qwen3vl-test-model")
	if err != nil {
		t.Fatal(err)
	}
	mc := chat.NewMessageCache(chat.DefaultMessageCacheBytes)
	tmpl.SetMessageCache(mc)
	lim := chat.Limits{MaxMessages: chat.DefaultMaxMessages, MaxParts: chat.DefaultMaxParts}
	var bodies [][]byte
	for _, line := range goldens.Lines(t, goldenDir+"chat_template.jsonl") {
		var c chatCase
		if err := json.Unmarshal(line, &c); err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, c.Request)
	}
	bodies = append(bodies, []byte(mediaBody))
	shifts := []func([]byte) []byte{
		func(b []byte) []byte { return b },
		func(b []byte) []byte { return append([]byte(`{"user":"a much longer field first",`), b[1:]...) },
		func(b []byte) []byte { return []byte(strings.Replace(string(b), `"messages":[`, `"messages" : [ `, 1)) },
		func(b []byte) []byte { return append([]byte(`{"stream":true, "x":[1,{"y":"}"}],`), b[1:]...) },
	}
	for pass := range 2 {
		for _, b := range bodies {
			for _, shift := range shifts {
				checkCachedParse(t, tmpl, plain, mc, shift(b), lim)
			}
		}
		if pass == 0 && mc.Stats().Hits == 0 {
			t.Fatal("no message was found in the cache")
		}
	}
	t.Logf("cache %+v", mc.Stats())
}

// TestCachedParseLimits: cached messages count against max_parts and the value cap as decoded
// ones do; a body over a limit fails with the same error, at the same element and byte.
func TestCachedParseLimits(t *testing.T) {
	tmpl, _ := chat.LoadTemplate(goldenDir + "qwen3vl-test-model")
	plain, _ := chat.LoadTemplate(goldenDir + "qwen3vl-test-model")
	mc := chat.NewMessageCache(chat.DefaultMessageCacheBytes)
	tmpl.SetMessageCache(mc)
	msg := `{"role":"user","content":"text %d","tool_calls":[{"a":[1,2,3,4,5,6,7,8]}]}`
	var msgs []string
	for i := range 12 {
		msgs = append(msgs, fmt.Sprintf(msg, i))
		body := []byte(`{"model":"m","messages":[` + strings.Join(msgs, ",") + `]}`)
		for _, lim := range []chat.Limits{{MaxMessages: 10, MaxParts: 10}, {MaxMessages: 3, MaxParts: 3}, {MaxMessages: 100, MaxParts: 1}} {
			checkCachedParse(t, tmpl, plain, mc, body, lim)
		}
	}
	if mc.Stats().Hits == 0 {
		t.Fatal("no hits")
	}
}

// TestObjectEnd: the brace scan steps over strings with escaped quotes and backslash runs,
// braces inside strings, and refuses what is not a closed object.
func TestObjectEnd(t *testing.T) {
	for _, c := range []struct {
		src  string
		want int // -1: not ok
	}{
		{`{}`, 2},
		{`{"a":"}"}x`, 9},
		{`{"a":"\"}"}`, 11},
		{`{"a":"\\"}`, 10},
		{`{"a":"\\\"}"}`, 13},
		{`{"a":"\\\\"}`, 12},
		{`{"a":[{"b":"]"}],"c":{}}`, 24},
		{`{"a":"x`, -1},
		{`{"a":{}`, -1},
		{`["a"]`, -1},
		{``, -1},
	} {
		end, ok := chat.ObjectEnd([]byte(c.src), 0)
		if c.want < 0 && ok || c.want >= 0 && (!ok || end != c.want) {
			t.Errorf("%s: end %d ok %v, want %d", c.src, end, ok, c.want)
		}
		// every end the scan gives is where encoding/json's object ends
		if ok && !json.Valid([]byte(c.src[:end])) {
			t.Errorf("%s: %q is not valid JSON", c.src, c.src[:end])
		}
	}
}

// FuzzCachedParse: for any body, parsing it a second time (its messages now cached), or parsing
// it shifted behind another member, gives exactly what an uncached parse gives.
func FuzzCachedParse(f *testing.F) {
	f.Add([]byte(mediaBody))
	f.Add([]byte(`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"a\"}"}]}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"video_url","video_url":{"url":"a"}}]},{"role":"user","content":"x"}]}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":"\ud800\\"},{}]}`))
	tmpl, err := chat.LoadTemplate(goldenDir + "qwen3vl-test-model")
	if err != nil {
		f.Fatal(err)
	}
	plain, err := chat.LoadTemplate(goldenDir + "qwen3vl-test-model")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		mc := chat.NewMessageCache(1 << 20)
		tmpl.SetMessageCache(mc)
		lim := chat.Limits{MaxMessages: 8, MaxParts: 8}
		checkCachedParse(t, tmpl, plain, mc, body, lim)
		checkCachedParse(t, tmpl, plain, mc, body, lim)
		if len(body) > 0 && body[0] == '{' {
			checkCachedParse(t, tmpl, plain, mc, append([]byte(`{"pad":"\\"}",`), body[1:]...), lim)
		}
	})
}
