package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/internal/sim"
	"github.com/kvroute/kvroute/routing/chat"
	"github.com/kvroute/kvroute/routing/layout"
	"github.com/kvroute/kvroute/routing/router"
)

// systemPrompt is shared by the video requests: a text prefix of several complete blocks.
const systemPrompt = "You are a careful video analyst. Describe what you see in order, name the objects, " +
	"the colours and the motion, and say when the scene changes. Keep the answer short."

// containerContract is the hub contract with frame_count_source "container" (a loader that
// trusts the container's frame count).
var containerContract = strings.Replace(sim.HubContract, `"frame_count_source": "decoded"`, `"frame_count_source": "container"`, 1)

// legacyContract differs from the hub contract (transformers 4.57 layout): a cohort mixing the two
// disagrees.
var legacyContract = strings.NewReplacer(`"bare_video_token"`, `"vision_wrapped_video_token"`,
	`"round_ties_even"`, `"legacy_ceil"`).Replace(sim.HubContract)

func videoPart(url string) map[string]any {
	return map[string]any{"type": "video_url", "video_url": map[string]any{"url": url}}
}

func imagePart(url string) map[string]any {
	return map[string]any{"type": "image_url", "image_url": map[string]any{"url": url}}
}

func textPart(s string) map[string]any { return map[string]any{"type": "text", "text": s} }

// mediaBody is a chat request: the system prompt, then one user message with parts.
func mediaBody(t *testing.T, model string, parts ...map[string]any) []byte {
	return mustJSON(t, map[string]any{"model": model, "messages": []map[string]any{
		{"role": "system", "content": systemPrompt},
		{"role": "user", "content": parts},
	}})
}

// uuidsOf returns the uuid of every media part of a forwarded body, in prompt order ("" when the
// part has none).
func uuidsOf(t *testing.T, body []byte) []string {
	t.Helper()
	req, err := chat.ParseRequest(body)
	if err != nil {
		t.Fatalf("forwarded body: %v", err)
	}
	out := make([]string, len(req.Media))
	for i, p := range req.Media {
		out[i] = p.UUID
	}
	return out
}

// TestVideoRouting checks exact video routing end to end (issue 7) against two simulators with the
// hub contract, one whose contract trusts the container's frame count, and two that disagree on
// their contracts.
func TestVideoRouting(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: decodes and routes several clips through Caddy to 5 simulators with differing contracts, ~5 s")
	}
	h := startHarness(t, []simSpec{
		{ID: "vid-a", Model: "qwen"}, {ID: "vid-b", Model: "qwen"},
		{ID: "cont-a", Model: "qwen-container", Contract: containerContract},
		{ID: "mix-a", Model: "qwen-mix"}, {ID: "mix-b", Model: "qwen-mix", Contract: legacyContract},
	})
	a := h.media + "/a/"
	question := textPart("Describe this video.")

	// coldWarm sends body twice and checks the warm repeat: same worker, more overlap than cold,
	// at least 0.9 of the blocks, and the simulator's cache hit over half the prompt.
	coldWarm := func(t *testing.T, body []byte) (cold, warm answer) {
		t.Helper()
		cold = h.coldChat(t, body)
		warm = h.chat(t, body).mustOK(t)
		if warm.fallback != "" || warm.worker != cold.worker || warm.overlap <= cold.overlap || 10*warm.overlap < 9*warm.total {
			t.Fatalf("warm: worker %s (cold %s), overlap %d (cold %d) of %d, fallback %q", warm.worker, cold.worker, warm.overlap, cold.overlap, warm.total, warm.fallback)
		}
		if 2*warm.cached <= warm.promptTokens {
			t.Fatalf("warm: simulator cached %d of %d prompt tokens", warm.cached, warm.promptTokens)
		}
		t.Logf("%d prompt tokens; cold %s overlap %d/%d; warm overlap %d/%d, cached %d", warm.promptTokens, cold.worker, cold.overlap, cold.total, warm.overlap, warm.total, warm.cached)
		return cold, warm
	}

	webm := mediaBody(t, "qwen", videoPart(a+"vp9_640x360_30fps_10s.webm"), question)
	var ref explainResp
	var refWorker string
	t.Run("vp9 10s cold then warm", func(t *testing.T) {
		d0, n0 := h.metric(t, "caddy_kvroute_routing_seconds_sum", `stage="decode"`), h.metric(t, "caddy_kvroute_routing_seconds_count", `stage="decode"`)
		ref = h.explain(t, webm)
		d1, n1 := h.metric(t, "caddy_kvroute_routing_seconds_sum", `stage="decode"`), h.metric(t, "caddy_kvroute_routing_seconds_count", `stage="decode"`)
		t.Logf("router decode of the 10 s 640x360 VP9 clip (300 frames, 20 sampled): %.3fs over %v decodes", d1-d0, n1-n0)
		if ref.fallback() != "" || len(ref.Media) != 1 || ref.Media[0].Kind != "video" || ref.Media[0].Frames != 20 ||
			ref.Media[0].GridTHW != [3]int{10, 22, 40} || len(ref.Media[0].Identity) != 16 {
			t.Fatalf("explain: %+v", ref)
		}
		cold, _ := coldWarm(t, webm)
		refWorker = cold.worker
		// the simulator received the router's identity as the part's uuid
		if got := uuidsOf(t, cold.sim.lastBody()); len(got) != 1 || got[0] != ref.Media[0].Identity+strings.Repeat("0", 48) {
			t.Fatalf("forwarded uuids %q, identity %s", got, ref.Media[0].Identity)
		}
	})

	t.Run("same clip remuxed, under another URL and as data URL", func(t *testing.T) {
		if refWorker == "" {
			t.Fatal("needs the cold/warm subtest")
		}
		raw, err := os.ReadFile(videoDir + "/vp9_640x360_30fps_10s.webm")
		if err != nil {
			t.Fatal(err)
		}
		for name, url := range map[string]string{
			"mkv":      a + "vp9_640x360_30fps_10s.mkv",
			"mp4":      a + "vp9_640x360_30fps_10s.mp4",
			"other":    h.media + "/b/vp9_640x360_30fps_10s.webm?v=2",
			"data_url": "data:video/webm;base64," + base64.StdEncoding.EncodeToString(raw),
		} {
			body := mediaBody(t, "qwen", videoPart(url), question)
			e := h.explain(t, body)
			if e.fallback() != "" || len(e.Media) != 1 || e.Media[0].Identity != ref.Media[0].Identity {
				t.Fatalf("%s: explain fallback %q media %+v, want identity %s", name, e.fallback(), e.Media, ref.Media[0].Identity)
			}
			got := h.chat(t, body).mustOK(t)
			if got.worker != refWorker || got.overlap != got.total || got.total != ref.TotalBlocks || 2*got.cached <= got.promptTokens {
				t.Fatalf("%s: worker %s (want %s), overlap %d/%d, cached %d of %d", name, got.worker, refWorker, got.overlap, got.total, got.cached, got.promptTokens)
			}
		}
	})

	t.Run("different clip, same text: overlap at most the text prefix", func(t *testing.T) {
		body := mediaBody(t, "qwen", videoPart(a+"vp9_333x197_24fps_3s.webm"), question)
		h.textPrefixOnly(t, body, ref.Media[0].Identity, promptTextPrefixBlocks(t, body))
	})

	t.Run("vp8 4s cold then warm", func(t *testing.T) {
		coldWarm(t, mediaBody(t, "qwen", videoPart(a+"vp8_320x240_25fps_4s.webm"), question))
	})

	t.Run("h264 falls back with unsupported_codec and is answered", func(t *testing.T) {
		body := mediaBody(t, "qwen", videoPart(a+"h264_640x360_30fps_3s.mp4"), question)
		before := h.totalRequests()
		if e := h.explain(t, body); e.fallback() != "unsupported_codec" || len(e.Media) != 0 {
			t.Errorf("explain: fallback %q media %+v", e.fallback(), e.Media)
		}
		got := h.chat(t, body)
		// the router's part: text-prefix routing, forwarded unchanged to one simulator
		if got.fallback != "unsupported_codec" || got.sim == nil || h.totalRequests() != before+1 {
			t.Fatalf("fallback %q worker %q, %d requests forwarded", got.fallback, got.worker, h.totalRequests()-before)
		}
		if !bytes.Equal(got.sim.lastBody(), body) {
			t.Fatal("a fallback must forward the client's bytes unchanged")
		}
		// the worker's part: a vLLM worker decodes H.264 itself and answers
		if got.status != 200 {
			t.Fatalf("SIMULATOR BUG (internal/sim/media.go Frontend.decode, via routing/mediaresolver which decodes only VP8/VP9): "+
				"the router fell back and forwarded correctly, but the simulator answered %d instead of serving the request as vLLM would: %.200s", got.status, got.body)
		}
	})

	t.Run("truncated vp9: exact on decoded frames, frame_count_mismatch on container", func(t *testing.T) {
		// independent decode: 30 presentable frames, a container that says otherwise
		hub, err := layout.ParseContract([]byte(sim.HubContract))
		if err != nil {
			t.Fatal(err)
		}
		info, err := h.res.Video(context.Background(), a+"truncated_vp9.webm", hub)
		if err != nil {
			t.Fatal(err)
		}
		if info.DecodedFrames != 30 || info.ContainerFrames == 30 {
			t.Fatalf("fixture: %d decoded frames, container says %d", info.DecodedFrames, info.ContainerFrames)
		}
		want, err := router.Sampler(hub, 30, info.SourceFPS, info.Width, info.Height)
		if err != nil {
			t.Fatal(err)
		}
		body := mediaBody(t, "qwen", videoPart(a+"truncated_vp9.webm"), question)
		e := h.explain(t, body)
		if e.fallback() != "" || len(e.Media) != 1 || e.Media[0].Frames != len(want) {
			t.Fatalf("decoded contract: explain fallback %q media %+v, want %d sampled frames of 30", e.fallback(), e.Media, len(want))
		}
		coldWarm(t, body)

		cbody := mediaBody(t, "qwen-container", videoPart(a+"truncated_vp9.webm"), question)
		if e := h.explain(t, cbody); e.fallback() != "frame_count_mismatch" {
			t.Fatalf("container contract: explain fallback %q (%s)", e.fallback(), e.Detail)
		}
		got := h.chat(t, cbody)
		if got.status != 200 || got.fallback != "frame_count_mismatch" || got.worker != "cont-a" {
			t.Fatalf("container contract: status %d fallback %q worker %q body %.200s", got.status, got.fallback, got.worker, got.body)
		}
		if u := uuidsOf(t, got.sim.lastBody()); len(u) != 1 || u[0] != "" {
			t.Fatalf("fallback forwarded uuids %q", u)
		}
	})

	t.Run("decompression bomb and random bytes: 4xx, not forwarded", func(t *testing.T) {
		for _, tc := range []struct{ url, code string }{
			{a + "field/bomb_vp8.webm", "frame_too_large"},
			{h.media + "/random.webm", "media_undecodable"},
		} {
			before := h.totalRequests()
			got := h.chat(t, mediaBody(t, "qwen", videoPart(tc.url), question))
			var eb struct {
				Error struct {
					Code    string `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(got.body, &eb); err != nil || got.status != 400 || eb.Error.Code != tc.code || eb.Error.Message == "" {
				t.Errorf("%s: status %d body %s, want 400 %s", tc.url, got.status, got.body, tc.code)
			}
			if n := h.totalRequests() - before; n != 0 {
				t.Errorf("%s: %d requests reached a simulator", tc.url, n)
			}
		}
	})

	t.Run("image, video, image keep their order", func(t *testing.T) {
		body := mediaBody(t, "qwen", imagePart(h.media+"/img1.png"), textPart("First the picture, then the clip:"),
			videoPart(a+"field/qA_320x208_4fps_8f.webm"), textPart("and the second picture:"), imagePart(h.media+"/img2.png"))
		e := h.explain(t, body)
		if e.fallback() != "" || len(e.Media) != 3 {
			t.Fatalf("explain: fallback %q media %+v", e.fallback(), e.Media)
		}
		kinds := []string{e.Media[0].Kind, e.Media[1].Kind, e.Media[2].Kind}
		if strings.Join(kinds, ",") != "image,video,image" || e.Media[0].Identity == e.Media[2].Identity ||
			e.Media[0].Width != 300 || e.Media[2].Width != 256 {
			t.Fatalf("explain media %+v", e.Media)
		}
		got := h.chat(t, body).mustOK(t)
		if got.fallback != "" {
			t.Fatalf("fallback %q", got.fallback)
		}
		u := uuidsOf(t, got.sim.lastBody())
		for i := range e.Media {
			if len(u) != 3 || u[i] != e.Media[i].Identity+strings.Repeat("0", 48) {
				t.Fatalf("forwarded uuids %q, explain identities %s %s %s", u, e.Media[0].Identity, e.Media[1].Identity, e.Media[2].Identity)
			}
		}
	})

	t.Run("fallbacks give their reason and forward no identity", func(t *testing.T) {
		clip := videoPart(a + "field/qB_320x240_4fps_10f.webm")
		withUUID := videoPart(a + "field/qB_320x240_4fps_10f.webm")
		withUUID["uuid"] = "client-chosen-id"
		kwargs := map[string]any{"model": "qwen", "mm_processor_kwargs": map[string]any{"fps": 1},
			"messages": []map[string]any{{"role": "user", "content": []map[string]any{clip, question}}}}
		audio := map[string]any{"type": "input_audio", "input_audio": map[string]any{"data": "UklGRg==", "format": "wav"}}
		for _, tc := range []struct {
			code string
			body []byte
		}{
			{"client_uuid", mediaBody(t, "qwen", withUUID, question)},
			{"mm_processor_kwargs", mustJSON(t, kwargs)},
			{"audio_present", mediaBody(t, "qwen", clip, audio, question)},
			{"adjacent_videos", mediaBody(t, "qwen", clip, videoPart(a+"field/qC_320x240_2fps_8f.webm"), question)},
			{"contract_mismatch", mediaBody(t, "qwen-mix", clip, question)},
		} {
			if e := h.explain(t, tc.body); e.fallback() != tc.code {
				t.Errorf("%s: explain fallback %q (%s)", tc.code, e.fallback(), e.Detail)
			}
			m0 := h.metric(t, "caddy_kvroute_decisions_total", `fallback="`+tc.code+`"`)
			before := h.totalRequests()
			got := h.chat(t, tc.body)
			if got.fallback != tc.code || got.sim == nil || h.totalRequests() != before+1 {
				t.Errorf("%s: fallback header %q, worker %q, %d requests forwarded", tc.code, got.fallback, got.worker, h.totalRequests()-before)
				continue
			}
			if m1 := h.metric(t, "caddy_kvroute_decisions_total", `fallback="`+tc.code+`"`); m1 != m0+1 {
				t.Errorf("%s: caddy_kvroute_decisions_total went %v → %v", tc.code, m0, m1)
			}
			// forwarded unchanged: no identity spliced in
			if !bytes.Equal(got.sim.lastBody(), tc.body) {
				t.Errorf("%s: the simulator received other bytes than the client sent", tc.code)
			}
			if tc.code != "client_uuid" && bytes.Contains(got.sim.lastBody(), []byte(`"uuid"`)) {
				t.Errorf("%s: forwarded body carries a uuid", tc.code)
			}
			t.Logf("%s: status %d from %s", tc.code, got.status, got.worker)
		}
	})

	t.Run("200 random requests never credit unheld blocks", func(t *testing.T) {
		clips := []string{"field/qA_320x208_4fps_8f.webm", "field/qB_320x240_4fps_10f.webm", "field/qC_320x240_2fps_8f.webm",
			"vp8_320x240_25fps_4s.webm", "vp9_320x240_2frames.webm", "vp9_bt709_320x240_24fps_2s.webm"}
		prompts := []string{"Describe this video.", "What moves first, and where does it go?", "Count the scene changes."}
		d0, n0 := h.metric(t, "caddy_kvroute_routing_seconds_sum", `stage="decode"`), h.metric(t, "caddy_kvroute_routing_seconds_count", `stage="decode"`)
		defer func() {
			d1, n1 := h.metric(t, "caddy_kvroute_routing_seconds_sum", `stage="decode"`), h.metric(t, "caddy_kvroute_routing_seconds_count", `stage="decode"`)
			t.Logf("router decode stage over the 200 requests: %.3fs in %v observations (decode cache)", d1-d0, n1-n0)
		}()
		r := rand.New(rand.NewPCG(42, 1))
		credited, full := 0, 0
		for i := 0; i < 200; i++ {
			body := mediaBody(t, "qwen", videoPart(a+clips[r.IntN(len(clips))]), textPart(prompts[r.IntN(len(prompts))]))
			got := h.chat(t, body).mustOK(t)
			if got.fallback != "" || got.hitBlocks < 0 {
				t.Fatalf("request %d: fallback %q, hit header %d", i, got.fallback, got.hitBlocks)
			}
			// vLLM recomputes the last block of a prompt that hit in full (the simulator reports
			// one block less then): those blocks are held all the same.
			held := got.hitBlocks
			if got.promptTokens%blockSize == 0 && got.hitBlocks == got.promptTokens/blockSize-1 {
				held++
			}
			if got.overlap > held {
				t.Fatalf("request %d: router credited %d blocks on %s, the simulator holds %d", i, got.overlap, got.worker, held)
			}
			credited += got.overlap
			if got.overlap == got.total {
				full++
			}
		}
		if full < 150 {
			t.Errorf("only %d of 200 requests had full overlap (18 distinct requests)", full)
		}
		t.Logf("200 requests: %d blocks credited, %d with full overlap", credited, full)
	})
}
