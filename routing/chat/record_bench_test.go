package chat_test

import (
	"testing"

	"github.com/kvroute/kvroute/routing/chat"
)

// BenchmarkRenderLongRecording is the request that records: chatBodyLong's messages seen for
// the second time, so every message's iteration runs traced and is stored (one op: a fresh
// cache, the untraced first render, then the recording one, then a replaying one).
func BenchmarkRenderLongRecording(b *testing.B) {
	tmpl, err := chat.LoadTemplate(goldenDir + "qwen3vl-test-model")
	if err != nil {
		b.Fatal(err)
	}
	body := chatBodyLong()
	b.ReportAllocs()
	for b.Loop() {
		tmpl.SetMessageCache(chat.NewMessageCache(chat.DefaultMessageCacheBytes))
		for range 3 {
			req, err := chat.ParseRequestLimited(body, chat.Limits{MaxMessages: 1000, MaxParts: 1000, Messages: tmpl.MessageCache()})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := tmpl.RenderPrompt(req); err != nil {
				b.Fatal(err)
			}
		}
	}
}
