package router

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/reason"
)

// The Route benchmarks measure one routing decision end to end (parse, template, tokenize, media
// view, hash, index, score, ranking) on the Qwen3-VL test model, so a change to the outcome types
// or the scoring glue shows against main with benchstat. The index is empty: overlap lookups
// return nothing, every worker is scored on load.

// benchWorkers returns n vLLM workers of model "qwen" with the hub contract.
func benchWorkers(n int) []Worker {
	ws := make([]Worker, n)
	for i := range ws {
		ws[i] = Worker{ID: fmt.Sprintf("w%03d", i), Endpoint: fmt.Sprintf("127.0.0.1:%d", 9000+i), Model: "qwen",
			Engine: kv.EngineVLLM, BlockSize: 16, Contract: json.RawMessage(hubContract)}
	}
	return ws
}

// textChat is a text-only chat body of about 1,500 prompt tokens.
var textChat = `{"model":"qwen","messages":[{"role":"system","content":"You are a helpful assistant."},` +
	`{"role":"user","content":"` + strings.Repeat("Summarize the routing of chat requests by KV cache overlap. ", 120) + `"}]}`

// benchRoute routes in b.N times and checks each outcome: a chosen worker and fallback want.
func benchRoute(b *testing.B, r *Router, in *Input, wantChosen bool, want reason.Code) {
	b.Helper()
	b.ReportAllocs()
	for b.Loop() {
		res, err := r.Route(context.Background(), in)
		if err != nil {
			b.Fatal(err)
		}
		if (res.Chosen != nil) != wantChosen || res.Fallback != want {
			b.Fatalf("chosen %+v, fallback %s: %s", res.Chosen, res.Fallback, res.Detail)
		}
	}
}

// BenchmarkRouteText routes a ~1,500-token text chat over 2 workers.
func BenchmarkRouteText(b *testing.B) {
	r := newTestRouter(b, nil)
	benchRoute(b, r, &Input{Path: "/v1/chat/completions", Body: []byte(textChat), Workers: benchWorkers(2)}, true, "")
}

// BenchmarkRouteText64Workers routes the same chat over 64 workers: scoring, ranking and the
// outcome's candidate list dominate more.
func BenchmarkRouteText64Workers(b *testing.B) {
	r := newTestRouter(b, nil)
	benchRoute(b, r, &Input{Path: "/v1/chat/completions", Body: []byte(textChat), Workers: benchWorkers(64)}, true, "")
}

// BenchmarkRouteVideo routes golden chat case chat_000 (one 10 s clip, 2,288 prompt tokens after
// expansion) over 2 workers, with fixed clip facts (fakeMedia): expansion, span hashing, uuid splice.
func BenchmarkRouteVideo(b *testing.B) {
	r := newTestRouter(b, &fakeMedia{identity: map[string]kv.Identity{"https://example.com/clip.mp4": 0x0123456789abcdef}})
	benchRoute(b, r, &Input{Path: "/v1/chat/completions", Body: []byte(chat000), Workers: benchWorkers(2)}, true, "")
}

// BenchmarkRouteNotRouted routes a body on a path that is not routed by KV overlap (parse and
// the path rule only).
func BenchmarkRouteNotRouted(b *testing.B) {
	r := newTestRouter(b, nil)
	benchRoute(b, r, &Input{Path: "/v1/embeddings", Body: []byte(textChat), Workers: benchWorkers(2)}, false, reason.NotRouted)
}
