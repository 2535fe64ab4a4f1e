package chat_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/routing/chat"
)

const mediaBody = `{"model":"qwen3-vl", "stream":true,"cache_salt":"s1",
 "messages":[
  {"role":"system","content":"sys"},
  {"role":"user","content":[
    {"type":"text","text":"a"},
    { "type" : "video_url", "video_url" : {"url":"https://x/1.mp4"} , "n":1.50 },
    {"type":"video_url","video_url":{"url":"https://x/2.webm"},"uuid":"abc"},
    {"type":"image_url","image_url":"data:image/png;base64,AAAA"},
    {"video_url":{"url":"https://x/3.mkv"}}
  ]},
  {"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AA","format":"wav"}}]}
 ],
 "mm_processor_kwargs":{"fps":2},"add_generation_prompt":false,"z":1e3}`

func TestParseRequestMedia(t *testing.T) {
	r, err := chat.ParseRequest([]byte(mediaBody))
	if err != nil {
		t.Fatal(err)
	}
	if r.SchemaErr != nil {
		t.Fatal(r.SchemaErr)
	}
	if r.Model != "qwen3-vl" || !r.Stream || r.CacheSalt != "s1" || r.AddGenerationPrompt {
		t.Errorf("top-level fields: %+v", r)
	}
	if !r.MMProcessorKwargs || !r.HasAudio || !r.AdjacentVideos || !r.ClientUUID {
		t.Errorf("flags: mm %v audio %v adjacent %v uuid %v", r.MMProcessorKwargs, r.HasAudio, r.AdjacentVideos, r.ClientUUID)
	}
	want := []struct {
		kind    blocks.MediaKind
		url     string
		uuid    string
		hasUUID bool
		msg, ix int
		obj     string
	}{
		{blocks.Video, "https://x/1.mp4", "", false, 1, 1, `{ "type" : "video_url", "video_url" : {"url":"https://x/1.mp4"} , "n":1.50 }`},
		{blocks.Video, "https://x/2.webm", "abc", true, 1, 2, `{"type":"video_url","video_url":{"url":"https://x/2.webm"},"uuid":"abc"}`},
		{blocks.Image, "data:image/png;base64,AAAA", "", false, 1, 3, `{"type":"image_url","image_url":"data:image/png;base64,AAAA"}`},
		{blocks.Video, "https://x/3.mkv", "", false, 1, 4, `{"video_url":{"url":"https://x/3.mkv"}}`},
	}
	if len(r.Media) != len(want) {
		t.Fatalf("got %d media parts, want %d", len(r.Media), len(want))
	}
	for i, w := range want {
		m := r.Media[i]
		if m.Kind != w.kind || m.URL != w.url || m.UUID != w.uuid || m.HasUUID != w.hasUUID || m.Message != w.msg || m.Index != w.ix {
			t.Errorf("media[%d] = %+v", i, m)
		}
		if got := mediaBody[m.ObjStart:m.ObjEnd]; got != w.obj {
			t.Errorf("media[%d] object bytes %q, want %q", i, got, w.obj)
		}
	}
}

func TestParseRequestFlags(t *testing.T) {
	for _, tc := range []struct {
		name, body                                  string
		adjacent, audio, mmkw, uuid, addGen, schema bool
	}{
		{"defaults", `{"messages":[{"role":"user","content":"hi"}]}`, false, false, false, false, true, false},
		{"video text video", `{"messages":[{"role":"user","content":[{"type":"video_url","video_url":{"url":"a"}},{"type":"text","text":"x"},{"type":"video_url","video_url":{"url":"b"}}]}]}`, false, false, false, false, true, false},
		{"videos in two messages", `{"messages":[{"role":"user","content":[{"type":"video_url","video_url":{"url":"a"}}]},{"role":"user","content":[{"type":"video_url","video_url":{"url":"b"}}]}]}`, false, false, false, false, true, false},
		{"video image video", `{"messages":[{"role":"user","content":[{"type":"video_url","video_url":{"url":"a"}},{"type":"image_url","image_url":{"url":"i"}},{"type":"video_url","video_url":{"url":"b"}}]}]}`, false, false, false, false, true, false},
		{"empty mm kwargs", `{"messages":[],"mm_processor_kwargs":{}}`, false, false, false, false, true, false},
		{"audio_url", `{"messages":[{"role":"user","content":[{"type":"audio_url","audio_url":{"url":"a"}}]}]}`, false, true, false, false, true, false},
		// vLLM resolves a part with a uuid by its media keys: a text part with a uuid is an error.
		{"uuid on text", `{"messages":[{"role":"user","content":[{"type":"text","text":"a","uuid":"x"}]}]}`, false, false, false, false, true, true},
		{"null text between videos", `{"messages":[{"role":"user","content":[{"type":"video_url","video_url":{"url":"a"}},{"type":"text","text":null},{"type":"video_url","video_url":{"url":"b"}}]}]}`, true, false, false, false, true, false},
		{"numeric uuid", `{"messages":[{"role":"user","content":[{"type":"video_url","video_url":{"url":"a"},"uuid":7}]}]}`, false, false, false, true, true, false},
		{"uuid-only image", `{"messages":[{"role":"user","content":[{"image_url":null,"uuid":"u"}]}]}`, false, false, false, true, true, false},
		{"image without url", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]}`, false, false, false, false, true, true},
		{"prompt_embeds", `{"messages":[{"role":"user","content":[{"type":"prompt_embeds","data":"AA"}]}]}`, false, false, false, false, true, true},
		{"null input_audio falls through to video", `{"messages":[{"role":"user","content":[{"input_audio":null,"video_url":"v"}]}]}`, false, false, false, false, true, false},
		{"null uuid", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"a"},"uuid":null}]}]}`, false, false, false, false, true, false},
		{"no messages", `{"model":"m"}`, false, false, false, false, true, true},
		{"content number", `{"messages":[{"role":"user","content":5}]}`, false, false, false, false, true, true},
		{"role missing", `{"messages":[{"content":"x"}]}`, false, false, false, false, true, true},
		{"unknown part", `{"messages":[{"role":"user","content":[{"type":"hologram"}]}]}`, false, false, false, false, true, true},
		{"stream string", `{"messages":[],"stream":"yes"}`, false, false, false, false, true, true},
		{"completions", `{"model":"m","prompt":"once upon"}`, false, false, false, false, true, false},
	} {
		r, err := chat.ParseRequest([]byte(tc.body))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if r.AdjacentVideos != tc.adjacent || r.HasAudio != tc.audio || r.MMProcessorKwargs != tc.mmkw ||
			r.ClientUUID != tc.uuid || r.AddGenerationPrompt != tc.addGen || (r.SchemaErr != nil) != tc.schema {
			t.Errorf("%s: adjacent %v audio %v mmkw %v uuid %v addGen %v schemaErr %v", tc.name,
				r.AdjacentVideos, r.HasAudio, r.MMProcessorKwargs, r.ClientUUID, r.AddGenerationPrompt, r.SchemaErr)
		}
		if r.SchemaErr != nil && !errors.Is(r.SchemaErr, chat.ErrSchema) {
			t.Errorf("%s: SchemaErr %v does not wrap ErrSchema", tc.name, r.SchemaErr)
		}
	}
	r, _ := chat.ParseRequest([]byte(`{"model":"m","prompt":"once upon"}`))
	if !r.HasPrompt || r.Prompt != "once upon" || r.HasMessages {
		t.Errorf("completions body: %+v", r)
	}
}

func TestParseRequestInvalid(t *testing.T) {
	for _, body := range []string{
		``, `{`, `[]`, `"x"`, `{"a":1}x`, `{"a":01}`, `{"a":1.}`, `{"a":-}`, `{"a":"\x01"}`, `{"a":"\q"}`,
		`{"a":NaN}`, `{'a':1}`, `{"a":1,}`, `{"a" 1}`, `{"a":[1 2]}`, strings.Repeat("[", 600) + strings.Repeat("]", 600),
	} {
		if _, err := chat.ParseRequest([]byte(body)); err == nil {
			t.Errorf("%q: no error", body)
		}
	}
	// Deep but within bounds is fine.
	body := `{"messages":[],"x":` + strings.Repeat("[", 500) + strings.Repeat("]", 500) + `}`
	if _, err := chat.ParseRequest([]byte(body)); err != nil {
		t.Errorf("500-deep nesting: %v", err)
	}
}

func TestSpliceUUIDs(t *testing.T) {
	r, err := chat.ParseRequest([]byte(mediaBody))
	if err != nil {
		t.Fatal(err)
	}
	uuids := []string{"00000000000000aa" + strings.Repeat("0", 48), "", "x\"y<", "ffff"}
	out := chat.SpliceUUIDs(r.Raw, r.Media, uuids)
	if !json.Valid(out) {
		t.Fatalf("spliced body is not valid JSON: %s", out)
	}
	// Every byte of the original survives in order; only the inserted members are new.
	ins := []string{`,"uuid":"00000000000000aa` + strings.Repeat("0", 48) + `"`, `,"uuid":"x\"y\u003c"`, `,"uuid":"ffff"`}
	var rebuilt []byte
	last := 0
	k := 0
	for i, m := range r.Media {
		if uuids[i] == "" {
			continue
		}
		rebuilt = append(rebuilt, r.Raw[last:m.ObjEnd-1]...)
		rebuilt = append(rebuilt, ins[k]...)
		k++
		last = m.ObjEnd - 1
	}
	rebuilt = append(rebuilt, r.Raw[last:]...)
	if !bytes.Equal(out, rebuilt) {
		t.Errorf("spliced body\n got %s\nwant %s", out, rebuilt)
	}
	// The spliced body parses to the same request with the new uuids.
	r2, err := chat.ParseRequest(out)
	if err != nil || r2.SchemaErr != nil {
		t.Fatalf("reparse: %v %v", err, r2.SchemaErr)
	}
	for i, want := range []string{uuids[0], "abc", "x\"y<", "ffff"} {
		if r2.Media[i].UUID != want || !r2.Media[i].HasUUID {
			t.Errorf("media[%d] uuid after splice %q, want %q", i, r2.Media[i].UUID, want)
		}
	}
	// Every other member keeps its bytes: the body minus the inserted text is the original.
	stripped := string(out)
	for _, s := range ins {
		stripped = strings.Replace(stripped, s, "", 1)
	}
	if stripped != mediaBody {
		t.Errorf("body without the inserted members differs from the original")
	}
	// Nothing to splice: identical bytes.
	if got := chat.SpliceUUIDs(r.Raw, r.Media, nil); !bytes.Equal(got, r.Raw) {
		t.Errorf("empty splice changed the body")
	}
	// Bad offsets are ignored.
	bad := []chat.MediaPart{{ObjStart: 0, ObjEnd: 3}, {ObjStart: -1, ObjEnd: 9999}}
	if got := chat.SpliceUUIDs(r.Raw, bad, []string{"a", "b"}); !bytes.Equal(got, r.Raw) {
		t.Errorf("splice with bad offsets changed the body")
	}
}

func TestParseRequestPartForms(t *testing.T) {
	body := `{"messages":[{"role":"user","content":["plain",{"type":"input_image","image_url":"https://x/i.png"},
		{"type":"image_embeds","image_embeds":"AAAA"},{"type":"video_url","video_url":{"url":"https://x/v.mp4"},"uuid":"u1"}]}]}`
	r, err := chat.ParseRequest([]byte(body))
	if err != nil || r.SchemaErr != nil {
		t.Fatal(err, r.SchemaErr)
	}
	if len(r.Media) != 3 {
		t.Fatalf("got %d media, want 3", len(r.Media))
	}
	if m := r.Media[0]; m.Kind != blocks.Image || m.URL != "https://x/i.png" || m.Embedded || m.Index != 1 {
		t.Errorf("input_image: %+v", m)
	}
	if m := r.Media[1]; m.Kind != blocks.Image || !m.Embedded || m.URL != "" || m.Index != 2 {
		t.Errorf("image_embeds: %+v", m)
	}
	if m := r.Media[2]; m.Kind != blocks.Video || m.URL != "https://x/v.mp4" || m.UUID != "u1" || !m.HasUUID || !r.ClientUUID {
		t.Errorf("video with uuid: %+v", m)
	}
}

// A typed part with another media key that comes first in vLLM's uuid resolution order would
// change meaning with a uuid: it is marked NoSplice and SpliceUUIDs leaves it alone.
func TestNoSplice(t *testing.T) {
	body := `{"messages":[{"role":"user","content":[{"type":"video_url","video_url":"v","input_audio":{}},{"type":"video_url","video_url":"w","input_audio":null}]}]}`
	r, err := chat.ParseRequest([]byte(body))
	if err != nil || r.SchemaErr != nil {
		t.Fatal(err, r.SchemaErr)
	}
	if !r.Media[0].NoSplice || r.Media[1].NoSplice {
		t.Fatalf("NoSplice flags %v %v, want true false", r.Media[0].NoSplice, r.Media[1].NoSplice)
	}
	out := chat.SpliceUUIDs(r.Raw, r.Media, []string{"a", "b"})
	want := strings.Replace(body, `"input_audio":null}`, `"input_audio":null,"uuid":"b"}`, 1)
	if string(out) != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
}

// TestParseRequestAddSpecialTokens: the vLLM extra add_special_tokens is read on both paths; absent
// or null leaves the path's default to the caller (nil); another JSON kind is a schema error (the
// request is forwarded and routed on load alone, as for "stream":"yes": vLLM's lax pydantic bool
// accepts "true" or 1, so refusing such a body with a 400 would refuse what the worker serves).
func TestParseRequestAddSpecialTokens(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		body   string
		want   *bool
		schema bool
	}{
		{`{"prompt":"x"}`, nil, false},
		{`{"prompt":"x","add_special_tokens":null}`, nil, false},
		{`{"prompt":"x","add_special_tokens":false}`, &no, false},
		{`{"messages":[{"role":"user","content":"hi"}],"add_special_tokens":true}`, &yes, false},
		{`{"prompt":"x","add_special_tokens":"true"}`, nil, true},
		{`{"messages":[],"add_special_tokens":1}`, nil, true},
		{`{"prompt":"x","add_special_tokens":{}}`, nil, true},
	} {
		r, err := chat.ParseRequest([]byte(tc.body))
		if err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		// The router's parser (with limits, skipping members it does not read) reads it too.
		lim, err := chat.ParseRequestLimited([]byte(tc.body), chat.Limits{MaxMessages: 8, MaxParts: 8})
		if err != nil || (lim.SchemaErr != nil) != (r.SchemaErr != nil) || (lim.AddSpecialTokens == nil) != (r.AddSpecialTokens == nil) ||
			lim.AddSpecialTokens != nil && *lim.AddSpecialTokens != *r.AddSpecialTokens {
			t.Errorf("%s: ParseRequestLimited reads %v %v, ParseRequest %v %v", tc.body, lim.AddSpecialTokens, lim.SchemaErr, r.AddSpecialTokens, r.SchemaErr)
		}
		if (r.SchemaErr != nil) != tc.schema || r.SchemaErr != nil && !strings.Contains(r.SchemaErr.Error(), "add_special_tokens is") {
			t.Errorf("%s: SchemaErr %v, want schema error %t", tc.body, r.SchemaErr, tc.schema)
		}
		if tc.schema {
			continue
		}
		if (r.AddSpecialTokens == nil) != (tc.want == nil) || tc.want != nil && *r.AddSpecialTokens != *tc.want {
			t.Errorf("%s: AddSpecialTokens %v, want %v", tc.body, r.AddSpecialTokens, tc.want)
		}
	}
}
