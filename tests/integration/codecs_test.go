package integration

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestCodecsThroughCaddy (issue 29): `media { codecs vp8 vp9 av1 h264 hevc }` through Caddy with
// the Caddyfile.example chain (TLS, header, encode, log) to 3 simulators that decode the same codecs.
// For each codec a clip is decoded at the edge (no fallback; explain's identity is the golden
// hf_fps identity of testdata/golden/video_identity_codecs.json, the hub contract's sampler), its
// repeat and its remux (the same stream in another container: the same identity) reach the worker
// that cached it and are credited every block, and the credit equals the blocks the simulator
// found cached. One pair crosses codecs: the lossless H.264 re-encode of a VP9 second decodes to
// the same pictures, so it is credited in full on the VP9 clip's worker.
func TestCodecsThroughCaddy(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: decodes VP8, VP9, AV1, H.264 and HEVC clips and their remuxes at the edge and in 3 simulators, ~4 s")
	}
	all := []string{"av1", "h264", "hevc", "vp8", "vp9"}
	h := startHarness(t, []simSpec{{ID: "cdc-1", Model: "qwen"}, {ID: "cdc-2", Model: "qwen"}, {ID: "cdc-3", Model: "qwen"}},
		harnessOpts{mediaOpts: "codecs vp8 vp9 av1 h264 hevc", simCodecs: all})
	mux := http.NewServeMux()
	mux.Handle("/c/", http.StripPrefix("/c/", http.FileServer(http.Dir("../../testdata/video-codecs"))))
	mux.Handle("/r/", http.StripPrefix("/r/", http.FileServer(http.Dir("../../testdata/video-codecs-remux"))))
	ms := httptest.NewServer(mux)
	t.Cleanup(ms.Close)
	question := textPart("Describe this video.")
	cases := []struct {
		name, first, again, identity string
	}{
		{"h264 mp4, remux mkv", "c/h264_bf3_640x360_30fps_3s.mp4", "c/h264_bf3_640x360_30fps_3s.mkv", "a9d1a040db34291f"},
		{"hevc mp4, remux mkv", "c/hevc_hvc1_640x360_30fps_2s.mp4", "r/hevc_hvc1_640x360_30fps_2s.mkv", "272b41a486de4d77"},
		{"av1 mp4, remux mkv", "c/av1_svt_640x360_30fps_2s.mp4", "r/av1_svt_640x360_30fps_2s.mkv", "034514923b2118f2"},
		{"vp9, lossless h264 of the same pictures", "c/vp9_first1s_copy_640x360.webm", "c/h264_lossless_vp9first1s_640x360.mp4", "1c2828bea78d9ada"},
		{"hevc main10 (yuv420p10le)", "c/hevc_main10_320x240_24fps_2s.mkv", "", "8c0297dae0469105"},
		{"h264 edit list (75 of 90 frames)", "c/h264_elst_trim0.5s.mp4", "", "1a28b9c4c8cfd54e"},
		{"av1 odd size 333x197", "c/av1_aom_333x197_24fps_1s.webm", "", "3f9ce0612a4a9764"},
		{"h264 yuv444p odd size", "c/h264_yuv444_333x197_24fps_2s.mkv", "", "7791269699ef2473"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := mediaBody(t, "qwen", videoPart(ms.URL+"/"+c.first), question)
			e := h.explain(t, body)
			if e.fallback() != "" || len(e.Media) != 1 || e.Media[0].Identity != c.identity {
				t.Fatalf("explain: fallback %q (%s) media %+v, want identity %s", e.fallback(), e.Detail, e.Media, c.identity)
			}
			cold := h.coldChat(t, body)
			bodies := [][]byte{body}
			if c.again != "" {
				again := mediaBody(t, "qwen", videoPart(ms.URL+"/"+c.again), question)
				if e2 := h.explain(t, again); e2.fallback() != "" || len(e2.Media) != 1 || e2.Media[0].Identity != c.identity {
					t.Fatalf("remux explain: fallback %q (%s) media %+v, want identity %s", e2.fallback(), e2.Detail, e2.Media, c.identity)
				}
				bodies = append(bodies, again)
			}
			for i, b := range bodies {
				w := h.chat(t, b).mustOK(t)
				if w.fallback != "" || w.worker != cold.worker || w.overlap != w.total || w.total != cold.total || w.hitBlocks != w.overlap {
					t.Fatalf("request %d after the cold one: worker %s (cold %s), overlap %d of %d (cold total %d), simulator hit %d blocks, fallback %q",
						i, w.worker, cold.worker, w.overlap, w.total, cold.total, w.hitBlocks, w.fallback)
				}
			}
			t.Logf("%s: %d blocks on %s, repeat%s credited in full", c.first, cold.total, cold.worker, map[bool]string{true: " and remux"}[c.again != ""])
		})
	}
}
