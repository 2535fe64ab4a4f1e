package sim_test

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/internal/sim"
	"github.com/kvroute/kvroute/internal/testkit"
	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/routing/layout"
	"github.com/kvroute/kvroute/routing/mediaresolver"
	"github.com/kvroute/kvroute/routing/router"
	"github.com/kvroute/kvroute/routing/scheduler"
)

// mediaServer serves a real VP9 clip and a generated PNG on loopback.
func mediaServer(t *testing.T) string {
	t.Helper()
	clip, err := os.ReadFile("../../testdata/video/vp9_333x197_24fps_3s.webm")
	if err != nil {
		t.Fatal(err)
	}
	img := image.NewRGBA(image.Rect(0, 0, 300, 200))
	for y := 0; y < 200; y++ {
		for x := 0; x < 300; x++ {
			img.Set(x, y, color.RGBA{uint8(x), uint8(y), uint8(x ^ y), 255})
		}
	}
	var pngBytes bytes.Buffer
	if err := png.Encode(&pngBytes, img); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/clip.webm", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(clip) })
	mux.HandleFunc("/pic.png", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(pngBytes.Bytes()) })
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts.URL
}

func loopbackResolver(t *testing.T) *mediaresolver.Resolver { return testkit.LoopbackResolver(t) }

// TestRouterAndSimulatorAgree is the end-to-end property: a request with a real VP9 clip and a PNG
// is routed by routing/router (which decodes the media, forwards the identities as uuids and
// scores two simulators), sent to the chosen simulator (which renders, decodes and expands it
// itself, with its own fetcher and decoder), and the simulator's KV events, decoded and normalized
// as the router does, are indexed for that worker. Then:
//   - every normalized local hash equals kv/blocks' hash of an independent expansion of the
//     request with the same identities, block for block, and the event count equals the router's
//     total blocks; the simulator's prompt length equals the router's;
//   - the router's run-time layout verification of every block carrying a forwarded identity
//     matches;
//   - routing the same request again gives full overlap on the same simulator, and the simulator
//     hits every block (vLLM rule) and publishes nothing new.
//
// It runs with current vLLM's event shape (map events, [identifier, offset] keys) and the older one
// (array events, bare identifiers).
func TestRouterAndSimulatorAgree(t *testing.T) {
	for _, tc := range []struct {
		name  string
		form  codec.Form
		style codec.ExtraKeysStyle
	}{{"map_pairs", codec.MapForm, codec.PairKeys}, {"array_bare", codec.ArrayForm, codec.BareKeys}} {
		t.Run(tc.name, func(t *testing.T) { routeAndSimulate(t, tc.form, tc.style) })
	}
}

func routeAndSimulate(t *testing.T, form codec.Form, style codec.ExtraKeysStyle) {
	ctx := context.Background()
	base := mediaServer(t)
	body := []byte(`{"model":"qwen","messages":[{"role":"system","content":"Answer briefly."},{"role":"user","content":[` +
		`{"type":"video_url","video_url":{"url":"` + base + `/clip.webm"}},` +
		`{"type":"text","text":"What happens in this clip, and how does it relate to the picture?"},` +
		`{"type":"image_url","image_url":{"url":"` + base + `/pic.png"}}]}],"cache_salt":"e2e"}`)

	m, lm := testkit.Models(t, modelDir)
	ix, err := index.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	sched, err := scheduler.New(nil, rand.NewPCG(1, 2))
	if err != nil {
		t.Fatal(err)
	}
	var verified []string
	r, err := router.New(router.DefaultConfig(), m, lm, ix, sched, loopbackResolver(t), router.Hooks{Verified: func(s string) { verified = append(verified, s) }}, nil)
	if err != nil {
		t.Fatal(err)
	}

	// Two simulators with their own media fetch and decode (Frontend default media).
	recs := map[string]*recorder{}
	urls := map[string]string{}
	var workers []router.Worker
	for _, id := range []string{"sim-a", "sim-b"} {
		rec := &recorder{}
		pub, err := sim.NewPublisher(&sim.PublisherConfig{WorkerID: id, OnPublish: rec.add, EventForm: form})
		if err != nil {
			t.Fatal(err)
		}
		bc, err := sim.NewBlockCache(&sim.BlockCacheConfig{KeyStyle: style})
		if err != nil {
			t.Fatal(err)
		}
		s := sim.New(&sim.Config{WorkerID: id, Model: "qwen", Frontend: newFrontend(t, nil, nil), Blocks: bc, Events: pub})
		recs[id], urls[id] = rec, newRecorderServer(t, s)
		rec2 := s.Record("127.0.0.1:1")
		workers = append(workers, router.Worker{ID: id, Endpoint: rec2.Endpoint, Model: rec2.Model, Engine: rec2.Engine,
			BlockSize: rec2.BlockSize, DPSize: 1, Contract: rec2.Contract})
	}
	in := &router.Input{Path: "/v1/chat/completions", Body: body, Workers: workers}

	cold, err := r.Route(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if cold.Fallback != "" || !cold.Forwarded || cold.Chosen == nil || cold.OverlapBlocks != 0 {
		t.Fatalf("cold route: fallback %q (%s), forwarded %v, overlap %d", cold.Fallback, cold.Detail, cold.Forwarded, cold.OverlapBlocks)
	}
	w := cold.Chosen.WorkerID
	hit, u := post(t, urls[w], string(cold.Body))
	if hit != 0 || u.PromptTokens != cold.RequestTokens {
		t.Fatalf("simulator: hit %d, prompt %d tokens; router %d", hit, u.PromptTokens, cold.RequestTokens)
	}

	// The simulator's events, as the router reads them.
	msgs := recs[w].all()
	ops := decodeAll(t, msgs)
	var stored []index.StoredBlock
	for _, op := range ops {
		if op.Type != codec.BlockStored {
			t.Fatalf("unexpected %v", op.Type)
		}
		for _, s := range op.Stored {
			stored = append(stored, index.StoredBlock{EngineHash: s.EngineHash, Parent: s.ParentEngineHash, HasParent: s.HasParent, LocalHash: s.LocalHash})
		}
	}
	if len(stored) != cold.TotalBlocks || cold.TotalBlocks < 10 {
		t.Fatalf("simulator stored %d blocks, router scored %d", len(stored), cold.TotalBlocks)
	}
	want := independentHashes(t, ctx, cold.Body)
	for i := range stored {
		if stored[i].LocalHash != want[i] {
			t.Errorf("block %d: event local hash %016x, request side %016x", i, stored[i].LocalHash, want[i])
		}
	}
	if err := ix.Store(ctx, index.WorkerKey{ID: w}, stored); err != nil {
		t.Fatal(err)
	}
	verifyEvents(t, r, w, msgs)
	if style == codec.PairKeys && len(verified) != 2 {
		t.Fatalf("%d blocks verified, want the first of each item", len(verified))
	}
	for _, v := range verified {
		if v != "match" {
			t.Fatalf("layout verification: %v", verified)
		}
	}

	warm, err := r.Route(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if warm.Fallback != "" || warm.Chosen == nil || warm.Chosen.WorkerID != w || warm.OverlapBlocks != warm.TotalBlocks {
		t.Fatalf("warm route: fallback %q, chosen %+v, overlap %d/%d", warm.Fallback, warm.Chosen, warm.OverlapBlocks, warm.TotalBlocks)
	}
	wantHit := warm.TotalBlocks
	if u.PromptTokens%16 == 0 {
		wantHit--
	}
	hit, u = post(t, urls[w], string(warm.Body))
	if hit != wantHit || u.PromptTokensDetails.CachedTokens != wantHit*16 {
		t.Fatalf("warm simulator: hit %d (cached %d), want %d blocks", hit, u.PromptTokensDetails.CachedTokens, wantHit)
	}
	if n := len(recs[w].all()); n != len(msgs) {
		t.Errorf("warm request published %d batches", n-len(msgs))
	}
	t.Logf("%d prompt tokens, %d blocks stored and matched, %d blocks verified, warm hit %d", u.PromptTokens, len(stored), len(verified), hit)
}

// independentHashes expands the forwarded body without the simulator's or the router's code
// paths above routing/layout: its own resolver for the layouts, the uuids for the identities,
// then kv/blocks.
func independentHashes(t *testing.T, ctx context.Context, body []byte) []kv.BlockHash {
	t.Helper()
	m, lm := testkit.Models(t, modelDir)
	c, err := layout.ParseContract([]byte(sim.HubContract))
	if err != nil {
		t.Fatal(err)
	}
	a, err := layout.NewQwen3VL(c, lm, m.Tokenizer)
	if err != nil {
		t.Fatal(err)
	}
	req, prompt, _ := testkit.Prompt(t, m, body)
	res := loopbackResolver(t)
	items := make([]layout.Media, len(req.Media))
	for i, p := range req.Media {
		id, ok := kv.ParseUUID(p.UUID)
		if !ok {
			t.Fatalf("part %d has no forwarded uuid: %q", i, p.UUID)
		}
		items[i] = layout.Media{Kind: p.Kind, Identity: id}
		if p.Kind == blocks.Image {
			info, err := res.Image(ctx, p.URL)
			if err != nil {
				t.Fatal(err)
			}
			if items[i].Image, err = a.ImageLayout(info.Width, info.Height); err != nil {
				t.Fatal(err)
			}
			continue
		}
		info, err := res.Video(ctx, p.URL, c)
		if err != nil {
			t.Fatal(err)
		}
		if items[i].Video, err = a.VideoLayout(layout.VideoInput{TotalFrames: info.DecodedFrames, SourceFPS: info.SourceFPS, Width: info.Width, Height: info.Height}); err != nil {
			t.Fatal(err)
		}
	}
	exp, err := a.Expand(prompt, items)
	if err != nil {
		t.Fatal(err)
	}
	p, err := blocks.HashPrompt(blocks.Config{BlockSize: 16, ImagePad: 151655, VideoPad: 151656}, blocks.SeedFor("", req.CacheSalt), exp.Tokens, exp.Spans)
	if err != nil {
		t.Fatal(err)
	}
	return p.Hashes()
}

// verifyEvents feeds every stored block that carries a media key to the router's run-time layout
// verification, as its event consumer does.
func verifyEvents(t *testing.T, r *router.Router, worker string, msgs []sim.Message) {
	t.Helper()
	for _, msg := range msgs {
		b, err := codec.Decode(codec.VLLM, msg.Payload)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range b.Events {
			for i := range ev.BlockHashes {
				var keys []kv.MediaKey
				for _, k := range ev.ExtraKeys[i] {
					if id, ok := kv.ParseUUID(k.Str); ok {
						keys = append(keys, kv.MediaKey{Identity: id, Offset: k.Offset, HasOffset: k.Kind == codec.KeyPair})
					}
				}
				if len(keys) > 0 {
					r.VerifyStored(worker, ev.TokenIDs[i*ev.BlockSize:(i+1)*ev.BlockSize], keys)
				}
			}
		}
	}
}
