package router_test

import (
	"testing"

	"github.com/kvroute/kvroute/routing/router"
)

// TestClassifyPath: the path rule the handler and the router share (docs/configuration.md: a path
// that ends in /chat/completions or /completions).
func TestClassifyPath(t *testing.T) {
	for p, want := range map[string]router.PathKind{
		"/v1/chat/completions":        router.PathChat,
		"/chat/completions":           router.PathChat,
		"/openai/v1/chat/completions": router.PathChat,
		"/v1/completions":             router.PathCompletions,
		"/completions":                router.PathCompletions,
		"/v1/chat/completions/":       router.PathOther,
		"/v1/completions/":            router.PathOther,
		"/v1/chat/completionsx":       router.PathOther,
		"/v1/xcompletions":            router.PathOther,
		"/v1/models":                  router.PathOther,
		"/v1/embeddings":              router.PathOther,
		"":                            router.PathOther,
		"/v1/responses":               router.PathResponses,
		"/openai/v1/responses":        router.PathResponses,
		"/v1/responses/resp_1":        router.PathOther,
		"/v1/responses/resp_1/cancel": router.PathOther,
		"/v1/responses/":              router.PathOther,
		"/v1/messages":                router.PathMessages,
		"/v1/messages/count_tokens":   router.PathOther,
		"/v1/messages/":               router.PathOther,
	} {
		if got := router.ClassifyPath(p); got != want {
			t.Errorf("ClassifyPath(%q) = %d, want %d", p, got, want)
		}
	}
}
