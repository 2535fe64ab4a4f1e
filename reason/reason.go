// Package reason holds kvroute's frozen fallback and error reason codes (DESIGN.md §8) and the error
// type that carries one through the Caddy-free packages to the handler.
//
// Codes are added, never renamed: logs, metrics and checks compare them exactly.
package reason

import (
	"errors"
	"fmt"
	"net/http"
)

// Code is one reason code of DESIGN.md §8.
type Code string

// Fallbacks: the request is forwarded unchanged and routed on its text prefix.
const (
	NoMediaSupport      Code = "no_media_support"
	FrontendDecodingOff Code = "frontend_decoding_off"
	UnsupportedCodec    Code = "unsupported_codec"
	ContractMissing     Code = "contract_missing"
	ContractMismatch    Code = "contract_mismatch"
	ContractUnsupported Code = "contract_unsupported"
	LayoutMismatch      Code = "layout_mismatch"
	BlockSizeMismatch   Code = "block_size_mismatch"
	ClientUUID          Code = "client_uuid"
	MMProcessorKwargs   Code = "mm_processor_kwargs"
	AudioPresent        Code = "audio_present"
	AdjacentVideos      Code = "adjacent_videos"
	LayoutError         Code = "layout_error"
	PlaceholderMismatch Code = "placeholder_mismatch"
	IdentityError       Code = "identity_error"
	FrameCountMismatch  Code = "frame_count_mismatch"
	MultiStream         Code = "multi_stream"
	ResolutionChange    Code = "resolution_change"
	Rotation            Code = "rotation"
	FrameLimit          Code = "frame_limit"
	DecodeTimeout       Code = "decode_timeout"
	EngineNoMMHashes    Code = "engine_no_mm_hashes"
	// MediaMixUnsupported: the model's adapter routes exactly only some media combinations
	// (nemotron_omni: one video and no other media, as Dynamo's nemotron.rs).
	MediaMixUnsupported Code = "media_mix_unsupported"
	// MediaBusy: the process-wide budget of media bytes in flight (media max_inflight_bytes) had
	// no room for this request's media within slot_wait.
	MediaBusy Code = "media_busy"
)

// Fallbacks to load-only routing: forwarded, no prefix to score.
const (
	TemplateError    Code = "template_error"
	IndexUnavailable Code = "index_unavailable"
	// NotRouted marks a request kvroute does not route by KV overlap at all: a path other than
	// chat or completions (GET /v1/models, …), or no model_dir configured. It keeps such requests
	// apart from exact decisions (Fallback "") in metrics, logs and explain (issue 15).
	NotRouted Code = "not_routed"
	// SpecialTokensUnsupported: the worker adds special tokens to this prompt (add_special_tokens:
	// a completions prompt by default) and the tokenizer's post-processor is one kvroute does not
	// reproduce (tokenizer.ErrSpecialTokens), so no block hash can be trusted.
	SpecialTokensUnsupported Code = "special_tokens_unsupported"
	// AdapterNotServed: the request names a LoRA adapter no worker lists now (an earlier worker
	// list did); it goes on load to the workers of the adapter's base model, or all when none
	// (DESIGN.md §1.1).
	AdapterNotServed Code = "adapter_not_served"
	// PromptTooCostly: the prompt holds a pre-token longer than the tokenizer's word bound
	// (tokenizer.DefaultMaxWordBytes, 256 KiB: one enormous "word"), whose BPE would cost time and
	// memory out of proportion to its size (DESIGN.md §6 "Prompts"); it is not tokenized.
	PromptTooCostly Code = "prompt_too_costly"
)

// Errors: answered with a 4xx and the JSON body of DESIGN.md §8, never forwarded.
const (
	BodyInvalid       Code = "body_invalid"
	BodyTooLarge      Code = "body_too_large"
	BodyTimeout       Code = "body_timeout"
	MediaURLBlocked   Code = "media_url_blocked"
	MediaFetchFailed  Code = "media_fetch_failed"
	MediaTooLarge     Code = "media_too_large"
	MediaFetchTimeout Code = "media_fetch_timeout"
	MediaUndecodable  Code = "media_undecodable"
	FrameTooLarge     Code = "frame_too_large"
	TooManyMedia      Code = "too_many_media"
	// TooManyParts: more messages, content parts or JSON values than the request limits
	// (max_messages, max_parts).
	TooManyParts Code = "too_many_parts"
)

// Codes of the agent APIs (issue 25: /v1/responses and /v1/messages, DESIGN.md §1.1), in their
// own block so other additions do not touch these lines.
const (
	// APIMediaUnkeyed (fallback, text prefix): a Responses or Messages request with media. vLLM's
	// parsers of these APIs take no media uuid, and kvroute forwards their bodies unchanged, so the
	// worker keys the media blocks by its own hash of the media: only the text before the first
	// media item can be matched.
	APIMediaUnkeyed Code = "api_media_unkeyed"
	// APIRequestInvalid (fallback, load only): a Responses or Messages request vLLM refuses while
	// parsing or converting it (routing/apis.Error); forwarded so the worker answers it.
	APIRequestInvalid Code = "api_request_invalid"
	// ResponseWorkerUnavailable (error, 404): a previous_response_id follow-up, or GET/DELETE/cancel
	// of a stored response, whose worker is unknown to kvroute or not available. Only that worker
	// holds the response; any other would answer "not found" (or worse, start the conversation
	// without its history), so the request is not forwarded. 404 because from the client's side the
	// stored response cannot be found anywhere it can be served (what vLLM and OpenAI answer for an
	// unknown id, so clients handle it the same way); the code tells it apart from a worker's 404.
	ResponseWorkerUnavailable Code = "response_worker_unavailable"
)

// Upstream errors: the request was forwarded but no worker answered it (issue 11). The kvroute
// handler answers with the JSON body of DESIGN.md §8 and the code's HTTPStatus when the proxy
// failed before any response byte was written.
const (
	UpstreamError       Code = "upstream_error"       // 502: dial error, connection refused/reset, bad response
	UpstreamUnavailable Code = "upstream_unavailable" // 503: no worker available for the request
	UpstreamTimeout     Code = "upstream_timeout"     // 504: the worker did not answer in time
)

// upstreamStatus maps each upstream error code to its HTTP status.
var upstreamStatus = map[Code]int{
	UpstreamError:       http.StatusBadGateway,
	UpstreamUnavailable: http.StatusServiceUnavailable,
	UpstreamTimeout:     http.StatusGatewayTimeout,
}

// status maps each client error code to its HTTP status (DESIGN.md §6).
var status = map[Code]int{
	BodyInvalid:       http.StatusBadRequest,
	BodyTooLarge:      http.StatusRequestEntityTooLarge,
	BodyTimeout:       http.StatusRequestTimeout,
	MediaURLBlocked:   http.StatusBadRequest,
	MediaFetchFailed:  http.StatusBadRequest,
	MediaTooLarge:     http.StatusRequestEntityTooLarge,
	MediaFetchTimeout: http.StatusBadRequest,
	MediaUndecodable:  http.StatusBadRequest,
	FrameTooLarge:     http.StatusBadRequest,
	TooManyMedia:      http.StatusBadRequest,
	TooManyParts:      http.StatusBadRequest,

	ResponseWorkerUnavailable: http.StatusNotFound,
}

// IsClientError reports whether c is answered with a 4xx instead of being forwarded.
func (c Code) IsClientError() bool { _, ok := status[c]; return ok }

// HTTPStatus is the status a client or upstream error code is answered with; 0 for fallbacks.
func (c Code) HTTPStatus() int {
	if s, ok := status[c]; ok {
		return s
	}
	return upstreamStatus[c]
}

// LoadOnly reports whether c routes on load alone (no prefix to score).
func (c Code) LoadOnly() bool {
	return c == TemplateError || c == IndexUnavailable || c == NotRouted || c == SpecialTokensUnsupported ||
		c == AdapterNotServed || c == APIRequestInvalid || c == PromptTooCostly
}

// Error carries a reason code and a human message. It wraps the underlying cause, if any.
type Error struct {
	Code    Code
	Message string
	Err     error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// New returns an *Error with a formatted message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an *Error with a message and an underlying cause.
func Wrap(code Code, err error, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Err: err}
}

// CodeOf returns the reason code carried by err (anywhere in its chain), or "" when it has none.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
