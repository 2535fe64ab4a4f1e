package sim_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/internal/sim"
	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/routing/router"
)

const (
	videoURL = "https://example.com/v.mp4"
	imageURL = "https://example.com/i.png"
)

// mixedBody has a video and an image with forwarded uuids (identities 0x1111… and 0x2222…).
var mixedBody = `{"model":"qwen","messages":[{"role":"user","content":[` +
	`{"type":"video_url","video_url":{"url":"` + videoURL + `"},"uuid":"` + router.ForwardedUUID(0x1111111111111111) + `"},` +
	`{"type":"text","text":"and this picture:"},` +
	`{"type":"image_url","image_url":{"url":"` + imageURL + `"},"uuid":"` + router.ForwardedUUID(0x2222222222222222) + `"},` +
	`{"type":"text","text":"Compare them."}]}]}`

// TestOracleSpans takes the worker-visible tokens of a video + image request as oracle tokens:
// the oracle frontend reads the same spans from the placeholder runs (the video's from its first
// timestamp to its last vision_end, over all its groups) and takes the identities from the uuids;
// without uuids it decodes the media for its own identities. Oracle tokens that hold other media
// than the request are an error.
func TestOracleSpans(t *testing.T) {
	fm := &fakeMedia{identity: map[string]kv.Identity{videoURL: 0x77, imageURL: 0x88}}
	// The older layout (no outer vision pair around a video, whole-prompt timestamp tokenization)
	// reads the same way.
	legacy := strings.NewReplacer(`"bare_video_token"`, `"vision_wrapped_video_token"`, `"spliced"`, `"whole"`,
		`"round_ties_even"`, `"legacy_ceil"`).Replace(sim.HubContract)
	for _, contract := range []string{legacy, sim.HubContract} {
		want, err := newFrontendContract(t, fm, nil, contract).Prepare(context.Background(), []byte(mixedBody))
		if err != nil {
			t.Fatal(err)
		}
		got, err := newFrontendContract(t, fm, want.Tokens, contract).Prepare(context.Background(), []byte(mixedBody))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Spans, want.Spans) || len(got.Spans) != 2 {
			t.Fatalf("oracle spans %+v, want %+v", got.Spans, want.Spans)
		}
	}
	want, err := newFrontend(t, fm, nil).Prepare(context.Background(), []byte(mixedBody))
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Spans) != 2 || want.Spans[0].Kind != blocks.Video || want.Spans[0].Identity != 0x1111111111111111 || want.Spans[1].Identity != 0x2222222222222222 {
		t.Fatalf("spans %+v", want.Spans)
	}
	oracle := newFrontend(t, fm, want.Tokens)
	got, err := oracle.Prepare(context.Background(), []byte(mixedBody))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Tokens, want.Tokens) || !slices.Equal(got.Spans, want.Spans) || !slices.Equal(got.Identifiers, want.Identifiers) {
		t.Fatalf("oracle spans %+v, want %+v", got.Spans, want.Spans)
	}
	// Without uuids the identities are the simulator's own decode.
	plain := mixedBody
	for _, id := range want.Identifiers {
		plain = strings.Replace(plain, `,"uuid":"`+id+`"`, "", 1)
	}
	got, err = oracle.Prepare(context.Background(), []byte(plain))
	if err != nil {
		t.Fatal(err)
	}
	if got.Spans[0].Identity != 0x77 || got.Spans[1].Identity != 0x88 || got.Identifiers[0] != router.ForwardedUUID(0x77) {
		t.Fatalf("own identities %+v %q", got.Spans, got.Identifiers)
	}
	// The oracle holds a video and an image; a request with one video does not fit.
	one := `{"messages":[{"role":"user","content":[{"type":"video_url","video_url":{"url":"` + videoURL + `"}}]}]}`
	if _, err := oracle.Prepare(context.Background(), []byte(one)); err == nil || !strings.Contains(err.Error(), "2 media items") {
		t.Fatalf("mismatch error %v", err)
	}

	// A simulator in oracle mode reports the oracle length as its prompt.
	s := sim.New(&sim.Config{Model: "qwen", Frontend: oracle})
	rec := newRecorderServer(t, s)
	_, u := post(t, rec, mixedBody)
	if u.PromptTokens != len(want.Tokens) {
		t.Fatalf("prompt tokens %d, want %d", u.PromptTokens, len(want.Tokens))
	}
}

// TestUUIDOnlyPart sends an item by uuid alone after it was processed once (vLLM's processor
// cache); an unknown uuid-only item is a 400-class request error.
func TestUUIDOnlyPart(t *testing.T) {
	fm := &fakeMedia{identity: map[string]kv.Identity{videoURL: 0x77, imageURL: 0x88}}
	f := newFrontend(t, fm, nil)
	first, err := f.Prepare(context.Background(), []byte(mixedBody))
	if err != nil {
		t.Fatal(err)
	}
	noURL := strings.Replace(mixedBody, `"video_url":{"url":"`+videoURL+`"},`, `"video_url":null,`, 1)
	again, err := f.Prepare(context.Background(), []byte(noURL))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(again.Tokens, first.Tokens) || !slices.Equal(again.Spans, first.Spans) {
		t.Fatal("uuid-only part laid out differently")
	}
	other := strings.Replace(noURL, "1111111111111111", "3333333333333333", 1)
	if _, err := f.Prepare(context.Background(), []byte(other)); err == nil {
		t.Fatal("unknown uuid-only part accepted")
	}
	if _, err := f.Prepare(context.Background(), []byte(`{"messages": [`)); err == nil {
		t.Fatal("bad JSON accepted")
	}
}
