package router

import (
	"sync"

	"github.com/kvroute/kvroute/routing/apis"
)

// apiChatBody converts a /v1/responses or /v1/messages body into the chat body vLLM renders for
// it (routing/apis) and records on res what the stored-response rules need (previous_response_id,
// store). A request vLLM refuses gives the *apis.Error: it is routed on load alone and the worker
// answers it. The conversion is timed in the parse stage (Route).
func (r *Router) apiChatBody(res *Result, kind PathKind, body []byte) ([]byte, error) {
	conv := r.converter()
	if kind == PathMessages {
		return conv.AnthropicChat(body, r.cfg.APIs.Anthropic)
	}
	rr, chatBody, err := conv.ResponsesChat(body, r.cfg.APIs.Responses)
	if rr != nil {
		res.PreviousResponseID, res.StoresResponse, res.ResponseFieldsRead = rr.PreviousResponseID, rr.Store, true
	}
	return chatBody, err
}

// converter returns the conversion cache (apis.Converter) the router uses: one per process,
// with the budget of the model's template cache (template_cache_size: 64 MiB by default, about
// twenty 100k-token agent conversations, as many as the template cache holds; none when the
// model has no template cache), kept across routers (config reloads) while that size is the
// same, as the template cache is. A conversation it no longer holds takes the full conversion,
// with the same result.
func (r *Router) converter() *apis.Converter {
	r.convOnce.Do(func() {
		var size int64
		if r.model != nil && r.model.Template != nil {
			if mc := r.model.Template.MessageCache(); mc != nil {
				size = mc.Stats().MaxBytes
			}
		}
		if size <= 0 {
			r.conv = apis.NewConverter(0) // the full path every time
			return
		}
		sharedConvMu.Lock()
		defer sharedConvMu.Unlock()
		if sharedConv == nil || sharedConv.MaxBytes() != size {
			sharedConv = apis.NewConverter(size)
		}
		r.conv = sharedConv
	})
	return r.conv
}

var (
	sharedConvMu sync.Mutex
	sharedConv   *apis.Converter
)

// ChatBody returns the chat-completions body the router renders for a request on path: the body
// itself for chat and completions paths, the chat form vLLM builds for /responses and /messages
// (as Route builds it, with opt). Used by `kvroute tokens --path`.
func ChatBody(path string, body []byte, opt apis.Options) ([]byte, error) {
	kind := ClassifyPath(path)
	if kind != PathResponses && kind != PathMessages {
		return body, nil
	}
	r := &Router{cfg: Config{APIs: opt}}
	return r.apiChatBody(&Result{}, kind, body)
}
