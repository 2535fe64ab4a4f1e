package router

import "strings"

// The path rule lives here alone: the handler reads and routes a body by it and the router renders
// the prompt by it, so the two cannot disagree on a path (they did: the handler also took a path
// with a trailing slash, which the router then did not route).

// PathKind is what a request path asks of the router.
type PathKind int

const (
	// PathOther is any other path (GET /v1/models, /v1/embeddings, ...): not routed by KV overlap
	// (reason not_routed); the handler streams its body through unread.
	PathOther PathKind = iota
	// PathChat is an OpenAI chat completions path: the messages are rendered with the chat template.
	PathChat
	// PathCompletions is an OpenAI completions path: a string prompt is tokenized (with the
	// special tokens the worker adds), token ids are taken as sent.
	PathCompletions
	// PathResponses is an OpenAI Responses path (POST /v1/responses): the request is converted to
	// the chat form vLLM builds (routing/apis), then routed as a chat. Its sub-paths
	// (/responses/{id}, /responses/{id}/cancel) are PathOther: they carry no prompt.
	PathResponses
	// PathMessages is an Anthropic Messages path (POST /v1/messages): converted like
	// PathResponses. /messages/count_tokens is PathOther (no generation, no cache to find).
	PathMessages
)

// ClassifyPath returns the kind of request path p by its ending, as docs/configuration.md states
// it: "/chat/completions" is chat, any other "/completions" is completions (so a prefix such as
// /openai/v1 is allowed), "/responses" is Responses, "/messages" is Anthropic Messages, anything
// else, a trailing slash included, is other.
func ClassifyPath(p string) PathKind {
	switch {
	case strings.HasSuffix(p, "/chat/completions"):
		return PathChat
	case strings.HasSuffix(p, "/completions"):
		return PathCompletions
	case strings.HasSuffix(p, "/responses"):
		return PathResponses
	case strings.HasSuffix(p, "/messages"):
		return PathMessages
	}
	return PathOther
}
