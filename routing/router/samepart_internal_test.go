package router

import (
	"context"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/kv"
)

// TestSamePartsResolvedOnce: a request with 29 copies of one image URL, 2 copies of one video URL
// and another image (32 media items, the limit) resolves each distinct (kind, URL) once: 3
// media resolutions, not 32 (the
// operator test saw 32 revalidations of one URL per request). Every copy keeps its place, its
// identity and its layout (the expansion holds 32 media spans, the copies' uuids forwarded).
func TestSamePartsResolvedOnce(t *testing.T) {
	media := &countingMedia{fakeMedia: fakeMedia{identity: map[string]kv.Identity{
		"https://x/a.png": 0xa1, "https://x/b.png": 0xb2, "https://x/c.webm": 0xc3,
	}}}
	r := newTestRouter(t, media)
	img := func(u string) string { return `{"type":"image_url","image_url":{"url":"` + u + `"}}` }
	parts := []string{`{"type":"video_url","video_url":{"url":"https://x/c.webm"}}`}
	for range 29 {
		parts = append(parts, img("https://x/a.png"))
	}
	parts = append(parts, img("https://x/b.png"), `{"type":"video_url","video_url":{"url":"https://x/c.webm"}}`, `{"type":"text","text":"Compare them."}`)
	body := `{"model":"qwen","messages":[{"role":"user","content":[` + strings.Join(parts, ",") + `]}]}`
	res, err := r.Route(context.Background(), &Input{Path: "/v1/chat/completions", Body: []byte(body), Workers: testWorkers()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Fallback != "" {
		t.Fatalf("fallback %s: %s", res.Fallback, res.Detail)
	}
	if n := media.fetches.Load(); n != 3 {
		t.Fatalf("%d media resolutions for 3 distinct URLs", n)
	}
	if len(res.Media) != 32 {
		t.Fatalf("%d media summaries, want 32", len(res.Media))
	}
	want := []string{kv.Identity(0xc3).Hex()}
	for range 29 {
		want = append(want, kv.Identity(0xa1).Hex())
	}
	want = append(want, kv.Identity(0xb2).Hex(), kv.Identity(0xc3).Hex())
	for i, m := range res.Media {
		if m.Identity != want[i] {
			t.Fatalf("media %d: identity %s, want %s", i, m.Identity, want[i])
		}
		if i >= 1 && i <= 30 && (m.Kind != "image" || m.Tokens != res.Media[1].Tokens || m.Width != 640) {
			t.Fatalf("image %d: %+v, image 1 %+v", i, m, res.Media[1])
		}
	}
	if res.Media[31].Tokens != res.Media[0].Tokens || res.Media[31].Kind != "video" {
		t.Fatalf("the second copy of the video: %+v, the first %+v", res.Media[31], res.Media[0])
	}
}
