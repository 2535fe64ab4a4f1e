package router

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/reason"
	"github.com/kvroute/kvroute/routing/chat"
	"github.com/kvroute/kvroute/routing/layout"
	"github.com/kvroute/kvroute/routing/model"
	"github.com/kvroute/kvroute/routing/scheduler"
)

const nemotronDir = "../../testdata/nemotron-test-model"

// countingMedia is fakeMedia that counts fetches.
type countingMedia struct {
	fakeMedia
	fetches atomic.Int64
}

func (c *countingMedia) Video(ctx context.Context, url string, ct *layout.Contract) (*VideoInfo, error) {
	c.fetches.Add(1)
	return c.fakeMedia.Video(ctx, url, ct)
}

func (c *countingMedia) Image(ctx context.Context, url string) (*ImageInfo, error) {
	c.fetches.Add(1)
	return c.fakeMedia.Image(ctx, url)
}

func newNemotronRouter(t *testing.T, media Media) (*Router, *model.Model) {
	t.Helper()
	m, err := model.Load(nemotronDir)
	if err != nil {
		t.Fatal(err)
	}
	lm, err := layout.LoadModel(nemotronDir)
	if err != nil {
		t.Fatal(err)
	}
	ix, _ := index.New(nil)
	s, _ := scheduler.New(nil, rand.NewPCG(1, 2))
	r, err := New(DefaultConfig(), m, lm, ix, s, media, Hooks{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r, m
}

func nemotronWorkers() []Worker {
	return []Worker{{ID: "n-a", Endpoint: "127.0.0.1:9001", Model: "nemo", Engine: kv.EngineVLLM, BlockSize: 16, Contract: json.RawMessage(layout.NemotronContractJSON)},
		{ID: "n-b", Endpoint: "127.0.0.1:9002", Model: "nemo", Engine: kv.EngineVLLM, BlockSize: 16, Contract: json.RawMessage(layout.NemotronContractJSON)}}
}

// TestNemotronRouting routes one video exactly (the 10 s 640×360 clip facts: 32 frames, 16
// tubelets of 42×24 patches) and checks that other media mixes fall back with
// media_mix_unsupported before anything is fetched, on the text before the first <video>.
func TestNemotronRouting(t *testing.T) {
	media := &countingMedia{fakeMedia: fakeMedia{identity: map[string]kv.Identity{"https://x/a.webm": 0xa1, "https://x/b.webm": 0xb2, "https://x/i.png": 0xc3}}}
	r, m := newNemotronRouter(t, media)
	const text = `{"type":"text","text":"You are a careful video analyst. Describe what you see in order and name the objects."}`
	body := func(parts string) []byte {
		return []byte(`{"model":"nemo","messages":[{"role":"system","content":[` + text + `]},{"role":"user","content":[` + parts + `,` + text + `]}]}`)
	}
	video := func(u string) string { return `{"type":"video_url","video_url":{"url":"` + u + `"}}` }
	image := `{"type":"image_url","image_url":{"url":"https://x/i.png"}}`

	res, err := r.Route(context.Background(), &Input{Path: "/v1/chat/completions", Body: body(video("https://x/a.webm")), Workers: nemotronWorkers()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Fallback != "" || len(res.Media) != 1 || res.Media[0].Frames != 32 || res.Media[0].GridTHW != [3]int{16, 24, 42} || !res.Forwarded {
		t.Fatalf("one video: fallback %q %s, media %+v", res.Fallback, res.Detail, res.Media)
	}
	if media.fetches.Load() != 1 {
		t.Fatalf("%d fetches", media.fetches.Load())
	}
	// Text touching <video> ("objects.<video>") tokenizes the placeholder differently: vLLM then
	// re-encodes the whole text, which kvroute does not model, so the request falls back.
	touching := []byte(`{"model":"nemo","messages":[{"role":"user","content":[` + text + `,` + video("https://x/a.webm") + `]}]}`)
	if res, err := r.Route(context.Background(), &Input{Path: "/v1/chat/completions", Body: touching, Workers: nemotronWorkers()}); err != nil ||
		res.Fallback != reason.PlaceholderMismatch {
		t.Errorf("text touching <video>: %+v, %v", res, err)
	}

	for name, parts := range map[string]string{
		"two videos":      video("https://x/a.webm") + `,{"type":"text","text":"and"},` + video("https://x/b.webm"),
		"video and image": video("https://x/a.webm") + `,` + image,
		"image":           image,
	} {
		before := media.fetches.Load()
		b := body(parts)
		res, err := r.Route(context.Background(), &Input{Path: "/v1/chat/completions", Body: b, Workers: nemotronWorkers()})
		if err != nil {
			t.Fatal(err)
		}
		if res.Fallback != reason.MediaMixUnsupported || res.Forwarded || media.fetches.Load() != before {
			t.Errorf("%s: fallback %q forwarded %v, %d fetches", name, res.Fallback, res.Forwarded, media.fetches.Load()-before)
		}
		// The text prefix ends at the first placeholder: <video> (several ids) or <image>.
		req, err := chat.ParseRequest(b)
		if err != nil {
			t.Fatal(err)
		}
		_, ids, err := m.PromptTokens(req)
		if err != nil {
			t.Fatal(err)
		}
		cut := len(ids)
		run := m.Tokenizer.Encode(layout.NemotronVideoToken)
		for i := range ids {
			if ids[i] == 18 || slices.Equal(ids[i:min(i+len(run), len(ids))], run) {
				cut = i
				break
			}
		}
		if cut == len(ids) || res.TotalBlocks != cut/16 {
			t.Errorf("%s: %d blocks scored, text prefix of %d tokens", name, res.TotalBlocks, cut)
		}
	}
}
