package integration

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/kvroute/kvroute/internal/goldens"
)

// goldenTokens returns the ids of one record of testdata/golden/tokens.jsonl.
func goldenTokens(t *testing.T, id string) []uint32 {
	return goldens.TokenIDs(t, "../../testdata/golden/tokens.jsonl", id)
}

// chat000 is golden chat case chat_000 (the video first, then "Describe this video.") with the
// 10 s 640×360 VP9 clip, for the given served model.
func chat000(t *testing.T, h *harness, model string) []byte {
	return mustJSON(t, map[string]any{"model": model, "messages": []map[string]any{{"role": "user", "content": []map[string]any{
		videoPart(h.media + "/a/vp9_640x360_30fps_10s.webm"), textPart("Describe this video.")}}}})
}

// TestOracleLayout checks the router against simulators in oracle mode: their worker-visible
// tokens are the golden expansion tok_expanded_ex1_new_wrapper_kept (chat_000 with layout_0000:
// hf_fps, hub budgets, bare_video_token, spliced timestamps), computed by independent oracles, not
// by kvroute. The warm repeat is credited at least 0.9 of its blocks and the run-time layout
// verification matches. With one golden id changed inside the video span, verification reports a
// mismatch and the next request falls back with layout_mismatch.
func TestOracleLayout(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: runs oracle-mode simulators on the golden video expansion, then a layout mismatch round, ~4 s")
	}
	golden := goldenTokens(t, "tok_expanded_ex1_new_wrapper_kept")
	if len(golden) != 2294 {
		t.Fatalf("golden expansion has %d tokens, want 2294", len(golden))
	}

	t.Run("golden tokens: warm repeat credited", func(t *testing.T) {
		h := startHarness(t, []simSpec{{ID: "orc-a", Model: "qwen-oracle", Oracle: golden}, {ID: "orc-b", Model: "qwen-oracle", Oracle: golden}})
		body := chat000(t, h, "qwen-oracle")
		e := h.explain(t, body)
		if e.fallback() != "" || e.TotalBlocks != len(golden)/blockSize || len(e.Media) != 1 || e.Media[0].GridTHW != [3]int{10, 22, 40} {
			t.Fatalf("explain: fallback %q total %d media %+v", e.fallback(), e.TotalBlocks, e.Media)
		}
		match0 := h.metric(t, "caddy_kvroute_layout_verified_total", `result="match"`)
		mis0 := h.metric(t, "caddy_kvroute_layout_verified_total", `result="mismatch"`)
		cold := h.chat(t, body).mustOK(t)
		if cold.fallback != "" || cold.promptTokens != len(golden) || cold.overlap != 0 {
			t.Fatalf("cold: fallback %q, simulator prompt %d tokens, overlap %d", cold.fallback, cold.promptTokens, cold.overlap)
		}
		h.waitEvents(t)
		warm := h.chat(t, body).mustOK(t)
		if warm.fallback != "" || warm.worker != cold.worker || 10*warm.overlap < 9*warm.total || warm.overlap > warm.hitBlocks+1 {
			t.Fatalf("warm: worker %s (cold %s), overlap %d of %d, simulator hit %d", warm.worker, cold.worker, warm.overlap, warm.total, warm.hitBlocks)
		}
		if m := h.metric(t, "caddy_kvroute_layout_verified_total", `result="match"`); m != match0+1 {
			t.Errorf("layout verified match %v → %v, want one more", match0, m)
		}
		if m := h.metric(t, "caddy_kvroute_layout_verified_total", `result="mismatch"`); m != mis0 {
			t.Errorf("layout verified mismatch %v → %v", mis0, m)
		}
		t.Logf("warm on %s: overlap %d of %d blocks, simulator hit %d, cached %d", warm.worker, warm.overlap, warm.total, warm.hitBlocks, warm.cached)
	})

	t.Run("one golden id changed: layout_mismatch", func(t *testing.T) {
		// Token 7 is the digit of the first group's timestamp "<0.3 seconds>" ([27 15 13 18 6486
		// 29] at 4..9): inside the video span (it starts at the timestamp) and in the first block,
		// the one verified. "3" (18) becomes "4" (19). A changed video pad cannot be used: the
		// simulator's oracle reader (internal/sim/oracle.go oracleSpans) then finds a pad run not
		// wrapped in vision_start/vision_end and rejects the request.
		bad := slices.Clone(golden)
		if !slices.Equal(bad[4:10], []uint32{27, 15, 13, 18, 6486, 29}) {
			t.Fatalf("golden timestamp tokens %v", bad[4:10])
		}
		bad[7] = 19
		h := startHarness(t, []simSpec{{ID: "bad-a", Model: "qwen-oracle", Oracle: bad}})
		body := chat000(t, h, "qwen-oracle")
		mis0 := h.metric(t, "caddy_kvroute_layout_verified_total", `result="mismatch"`)
		lm0 := h.metric(t, "caddy_kvroute_decisions_total", `fallback="layout_mismatch"`)
		h.coldChat(t, body)
		if m := h.metric(t, "caddy_kvroute_layout_verified_total", `result="mismatch"`); m != mis0+1 {
			t.Fatalf("layout verified mismatch %v → %v, want one more", mis0, m)
		}
		if e := h.explain(t, body); e.fallback() != "layout_mismatch" {
			t.Errorf("explain after the mismatch: fallback %q", e.fallback())
		}
		var st struct {
			Models map[string]struct {
				ContractAgreement bool   `json:"contract_agreement"`
				Reason            string `json:"reason"`
			} `json:"models"`
		}
		res, err := h.client.Get(h.admin + "/kvroute/stats")
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(res.Body).Decode(&st)
		res.Body.Close()
		if m := st.Models["qwen-oracle"]; err != nil || m.ContractAgreement || m.Reason != "layout_mismatch" {
			t.Errorf("stats after the mismatch: %+v (%v)", st, err)
		}
		next := h.chat(t, body)
		if next.status != 200 || next.fallback != "layout_mismatch" {
			t.Fatalf("next request: status %d fallback %q", next.status, next.fallback)
		}
		if m := h.metric(t, "caddy_kvroute_decisions_total", `fallback="layout_mismatch"`); m != lm0+1 {
			t.Errorf("decisions with layout_mismatch %v → %v", lm0, m)
		}
		if u := uuidsOf(t, next.sim.lastBody()); len(u) != 1 || u[0] != "" {
			t.Errorf("layout_mismatch forwarded uuids %q", u)
		}
	})
	t.Run("a mismatch is charged to the model of the worker that sent it", func(t *testing.T) {
		// Two models behind one Caddy, the same clip: qwen-oracle's worker lays it out as the
		// router does, qwen-bad's worker does not. The warm repeat on qwen-oracle stores nothing
		// new, so its expectation for the clip's identity stays pending when qwen-bad's first
		// request comes.
		bad := slices.Clone(golden)
		bad[7] = 19
		h := startHarness(t, []simSpec{{ID: "orc-a", Model: "qwen-oracle", Oracle: golden}, {ID: "bad-a", Model: "qwen-bad", Oracle: bad}})
		good := chat000(t, h, "qwen-oracle")
		h.chat(t, good).mustOK(t)
		h.waitEvents(t)
		if w := h.chat(t, good).mustOK(t); w.overlap != w.total {
			t.Fatalf("warm on qwen-oracle: overlap %d of %d", w.overlap, w.total)
		}
		wrong := chat000(t, h, "qwen-bad")
		if c := h.chat(t, wrong).mustOK(t); c.fallback != "" || c.worker != "bad-a" {
			t.Fatalf("qwen-bad cold: fallback %q worker %s", c.fallback, c.worker)
		}
		h.waitEvents(t)
		gotGood, gotBad := h.explain(t, good).fallback(), h.explain(t, wrong).fallback()
		if gotGood != "" || gotBad != "layout_mismatch" {
			t.Fatalf("ROUTER BUG (routing/router/verify.go verifier.expect / Router.VerifyStored: expectations are keyed by "+
				"identity alone and the storing worker's model is not checked): after qwen-bad's worker stored a wrong layout, "+
				"qwen-oracle falls back with %q (want exact) and qwen-bad with %q (want layout_mismatch)", gotGood, gotBad)
		}
	})
	t.Run("a difference later in the video span is found", func(t *testing.T) {
		// The second group's timestamp "<1.3 seconds>" (232..237, block 14) becomes "<1.4 seconds>":
		// block 0 still matches. The simulator stores every block of the prompt in one
		// BlockStored event, all carrying the clip's identity (DESIGN.md §2.3: the first
		// BlockStored events carrying a forwarded identity are compared).
		bad := slices.Clone(golden)
		if !slices.Equal(bad[231:239], []uint32{151653, 27, 16, 13, 18, 6486, 29, 151652}) {
			t.Fatalf("golden second group tokens %v", bad[231:239])
		}
		bad[235] = 19
		h := startHarness(t, []simSpec{{ID: "late-a", Model: "qwen-oracle", Oracle: bad}})
		body := chat000(t, h, "qwen-oracle")
		mis0 := h.metric(t, "caddy_kvroute_layout_verified_total", `result="mismatch"`)
		h.coldChat(t, body)
		mis := h.metric(t, "caddy_kvroute_layout_verified_total", `result="mismatch"`) - mis0
		if f := h.explain(t, body).fallback(); f != "layout_mismatch" || mis != 1 {
			t.Fatalf("ROUTER BUG (routing/router/verify.go Router.VerifyStored deletes the expectation after the first "+
				"block carrying the identity, so only block 0 of the video is compared): a worker whose layout differs "+
				"from block 14 on is verified as a match (mismatch count +%v, next fallback %q, want +1 and layout_mismatch)", mis, f)
		}
	})
}
