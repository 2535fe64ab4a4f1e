package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/testkit/cputime"

	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/routing/apis"
	"github.com/kvroute/kvroute/routing/chat"
	"github.com/kvroute/kvroute/routing/model"
	"github.com/kvroute/kvroute/routing/router"
	"github.com/kvroute/kvroute/routing/tokenizer"
)

// BenchmarkRequestPath runs kvroute's per-request text path in process, without HTTP: parse
// (chat.ParseRequestLimited), template (Template.RenderPrompt: in pieces, as the router renders a
// text chat), tokenize (Model.EncodePromptRuns, with the default segment cache, warm from the
// earlier requests) and block hashes (router.HashTextRuns: blocks.HashRuns with the router's
// block memo, block_size 16), on the bench/proxy workloads' bodies (responses100k and messages100k converted to their
// chat form first, by apis.Converter as the router converts them, timed in parse; the -as-chat
// variants send the same conversations as their chat form, converted before the clock starts). One op is one request. multiturn100k feeds one
// conversation growing by one turn per op, as a client of the harness does; cold111k a new
// document per op. Run with a fixed count, e.g. -benchtime 30x: the bodies are built up front.
// Besides wall time it reports the process CPU time (getrusage, so GC work counts) of each stage
// and in all, per op: on a shared machine CPU time is the steadier figure. faults/op are the
// process's minor page faults per op: all bodies are built up front, so the heap is large and
// rarely collected and the big per-request buffers land on fresh pages; a long-running Caddy
// reuses its freed pages, so read the CPU figures next to this one.
func BenchmarkRequestPath(b *testing.B) {
	m, err := model.Load(filepath.Join("..", "..", "testdata", "golden", "qwen3vl-test-model"))
	if err != nil {
		b.Fatal(err)
	}
	m.Tokenizer.SetSegmentCache(tokenizer.NewSegmentCache(tokenizer.DefaultSegmentCacheBytes)) // as caddymodule does
	m.Template.SetMessageCache(chat.NewMessageCache(chat.DefaultMessageCacheBytes))
	g := &docGen{tokensPerWord: 1}
	probe := g.doc(99, 20000)
	g.tokensPerWord = float64(len(m.Tokenizer.Encode(probe))) / float64(len(strings.Fields(probe)))
	systemPrompt = "You are a careful assistant. Answer from the documents the user gives.\n" + g.doc(7, 1000)
	conv := apis.NewConverter(chat.DefaultMessageCacheBytes) // as the router sizes it
	for _, name := range []string{"multiturn100k", "cold111k", "chat4k", "responses100k", "messages100k", "responses100k-as-chat", "messages100k-as-chat"} {
		var w workload
		base, asChat := strings.CutSuffix(name, "-as-chat")
		for _, x := range workloads {
			if x.name == base {
				w = x
			}
		}
		b.Run(name, func(b *testing.B) {
			// One warm-up request (as the harness's first request per client), then b.N.
			bodies := w.build(g, 1, b.N+1, "")[0]
			path := w.path
			if asChat { // the same conversation sent as its chat form: what the conversion adds
				for i, body := range bodies {
					bodies[i] = asChatBody(b, w.path, body)
				}
				path = "/v1/chat/completions"
			}
			var stage [4]time.Duration // process CPU of parse, template, tokenize, hash
			run := func(body []byte) {
				c0 := cputime.Process()
				switch path { // the agent APIs: their chat form, as Route converts them
				case "/v1/responses":
					_, cb, err := conv.ResponsesChat(body, apis.ResponsesOptions{})
					if err != nil {
						b.Fatal(err)
					}
					defer apis.ReleaseChatBody(cb)
					body = cb
				case "/v1/messages":
					cb, err := conv.AnthropicChat(body, apis.AnthropicOptions{})
					if err != nil {
						b.Fatal(err)
					}
					defer apis.ReleaseChatBody(cb)
					body = cb
				}
				req, err := chat.ParseRequestLimited(body, chat.Limits{MaxMessages: chat.DefaultMaxMessages, MaxParts: chat.DefaultMaxParts,
					Messages: m.Template.MessageCache()})
				if err != nil {
					b.Fatal(err)
				}
				c1 := cputime.Process()
				prompt, err := m.Template.RenderPrompt(req) // in pieces, as the router renders a text chat
				if err != nil {
					b.Fatal(err)
				}
				c2 := cputime.Process()
				runs, err := m.EncodePromptRuns(prompt, false) // not joined, as the router keeps them
				if err != nil {
					b.Fatal(err)
				}
				c3 := cputime.Process()
				if _, _, err := router.HashTextRuns(blocks.Config{BlockSize: 16}, blocks.SeedFor("", ""), runs); err != nil {
					b.Fatal(err)
				}
				c4 := cputime.Process()
				for i, d := range []time.Duration{c1 - c0, c2 - c1, c3 - c2, c4 - c3} {
					stage[i] += d
				}
			}
			run(bodies[0])
			stage = [4]time.Duration{}
			b.ReportAllocs()
			b.SetBytes(int64(len(bodies[len(bodies)-1])))
			b.ResetTimer()
			f0 := cputime.MinorFaults()
			for i := 0; i < b.N; i++ {
				run(bodies[i+1])
			}
			b.ReportMetric(float64(cputime.MinorFaults()-f0)/float64(b.N), "faults/op")
			var total time.Duration
			for i, unit := range []string{"parse-cpu-µs/op", "template-cpu-µs/op", "tokenize-cpu-µs/op", "hash-cpu-µs/op"} {
				b.ReportMetric(float64(stage[i].Microseconds())/float64(b.N), unit)
				total += stage[i]
			}
			b.ReportMetric(float64(total.Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// asChatBody is the chat body vLLM builds for an agent API body (the full conversion).
func asChatBody(b *testing.B, path string, body []byte) []byte {
	if path == "/v1/messages" {
		f, err := apis.FromAnthropic(body, apis.AnthropicOptions{})
		if err != nil {
			b.Fatal(err)
		}
		return f.Body()
	}
	r, err := apis.FromResponses(body, apis.ResponsesOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return r.Form.Body()
}
