package router

import "github.com/kvroute/kvroute/routing/apis"

// apiChatBody converts a /v1/responses or /v1/messages body into the chat body vLLM renders for
// it (routing/apis) and records on res what the stored-response rules need (previous_response_id,
// store). A request vLLM refuses gives the *apis.Error: it is routed on load alone and the worker
// answers it. The conversion is timed in the parse stage (Route).
func (r *Router) apiChatBody(res *Result, kind PathKind, body []byte) ([]byte, error) {
	if kind == PathMessages {
		f, err := apis.FromAnthropic(body, r.cfg.APIs.Anthropic)
		if err != nil {
			return nil, err
		}
		return f.Body(), nil
	}
	rr, err := apis.FromResponses(body, r.cfg.APIs.Responses)
	if rr != nil {
		res.PreviousResponseID, res.StoresResponse, res.ResponseFieldsRead = rr.PreviousResponseID, rr.Store, true
	}
	if err != nil {
		return nil, err
	}
	return rr.Form.Body(), nil
}

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
