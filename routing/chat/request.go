package chat

import (
	"errors"
	"fmt"

	"github.com/kvroute/kvroute/kv/blocks"
)

// ErrSchema is wrapped by Request.SchemaErr: the body is valid JSON but not a chat request the
// router can render (DESIGN.md §1 step 1; the handler routes such a request on load alone with
// reason template_error).
var ErrSchema = errors.New("request does not fit the chat or completions schema")

// Request is a parsed OpenAI chat (or completions) request body. Raw is the body exactly as
// received; every byte offset below indexes Raw.
type Request struct {
	Raw    []byte
	Model  string
	Stream bool
	// AddGenerationPrompt is the vLLM extra add_generation_prompt (default true).
	AddGenerationPrompt bool
	// ContinueFinalMessage is the vLLM extra continue_final_message: the prompt ends inside the
	// final message (Hugging Face truncates the rendered chat after its text).
	ContinueFinalMessage bool
	// AddSpecialTokens is the vLLM extra add_special_tokens when the body sets it (nil when absent
	// or null): whether the tokenizer's post-processor (a BOS, …) is applied to the prompt. vLLM's
	// defaults apply otherwise: true for /v1/completions (CompletionRequest), false for chat
	// (ChatCompletionRequest; the template writes the special tokens itself).
	AddSpecialTokens *bool
	// ReasoningEffort is the request's reasoning_effort ("" when absent); vLLM passes it to the
	// template as a variable.
	ReasoningEffort string
	// CacheSalt is the vLLM extra cache_salt ("" when absent).
	CacheSalt string
	// OwnChatTemplate is set when the request brings its own chat_template (a vLLM extra: the
	// worker renders with it when started with --trust-request-chat-template, else it refuses
	// the request). Render then fails: kvroute renders the model's template only.
	OwnChatTemplate bool
	// MMProcessorKwargs is set when mm_processor_kwargs is present and not an empty object.
	MMProcessorKwargs bool
	// HasAudio is set when any content part is audio (input_audio or audio_url).
	HasAudio bool
	// AdjacentVideos is set when one message's content list has two video parts next to each
	// other (no other part between them).
	AdjacentVideos bool
	// ClientUUID is set when the client sent a uuid on any media part.
	ClientUUID bool
	// Media lists the image and video parts in prompt order (message order, then part order).
	Media []MediaPart
	// Prompt is the /v1/completions prompt when it is a string (or a batch of one string);
	// HasPrompt says a prompt was present. PromptIDs is the prompt when it is token ids (a list
	// of integers, or a batch of one such list): the worker prefills them as sent, without
	// special tokens (vllm/entrypoints/openai/protocol.py CompletionRequest.prompt). A batch of
	// several prompts is a SchemaErr: it has no one prompt to route by.
	Prompt    string
	PromptIDs []uint32
	HasPrompt bool
	// HasMessages says the body has a messages member (a chat request).
	HasMessages bool
	// SchemaErr is non-nil (wrapping ErrSchema) when the body parses as JSON but does not fit
	// the chat schema.
	SchemaErr error

	root               *node
	messages           *node
	tools              *node
	chatTemplateKwargs *node
	documents          *node
}

// MediaPart is one image or video content part.
type MediaPart struct {
	Kind blocks.MediaKind
	// URL is the part's url exactly as sent (for a data: URL, the whole URL); "" when the part
	// carries no URL (a uuid-only part, or Embedded).
	URL string
	// Embedded is set for image_embeds and image_pil parts (no URL to fetch).
	Embedded bool
	// UUID is the client's uuid member (when HasUUID); a non-string uuid is given as its JSON
	// text (vLLM applies str() to it).
	UUID    string
	HasUUID bool
	// NoSplice is set when adding a uuid would change how vLLM reads the part (a part with a
	// "type" and no uuid goes by its type; with a uuid it goes by the first media key it has, and
	// this part has another media key first). No identity may be forwarded for it.
	NoSplice bool
	// Message and Index locate the part: messages[Message].content[Index].
	Message, Index int
	// ObjStart and ObjEnd are the byte offsets of the part object in Raw: Raw[ObjStart] is '{'
	// and Raw[ObjEnd-1] is '}'.
	ObjStart, ObjEnd int
}

// ParseRequest parses an OpenAI chat or completions request body. It keeps body (Request.Raw
// aliases it; the caller must not modify it afterwards). The error is non-nil only when body is
// not one valid JSON object (→ body_invalid); a JSON object that does not fit the chat schema is
// returned with SchemaErr set.
func ParseRequest(body []byte) (*Request, error) {
	return parseRequest(body, &decoder{src: body})
}

func parseRequest(body []byte, d *decoder) (*Request, error) {
	root, err := decode(d)
	if err != nil {
		return nil, fmt.Errorf("parsing request body: %w", err)
	}
	if root.kind != kindObject {
		return nil, fmt.Errorf("parsing request body: %w: top level is %s, not an object", errSyntax, root.kind)
	}
	r := &Request{Raw: body, root: root, AddGenerationPrompt: true}
	r.SchemaErr = r.fill()
	if r.SchemaErr != nil {
		r.SchemaErr = fmt.Errorf("%w: %w", ErrSchema, r.SchemaErr)
	}
	return r, nil
}

// optionalMembers are the top-level request members read by fill, in check order: absent or null
// keeps the default, another kind than want is a schema error, else set stores the value.
var optionalMembers = []struct {
	name string
	want kind
	set  func(r *Request, v *node)
}{
	{"model", kindString, func(r *Request, v *node) { r.Model = v.str }},
	{"stream", kindBool, func(r *Request, v *node) { r.Stream = v.b }},
	{"add_generation_prompt", kindBool, func(r *Request, v *node) { r.AddGenerationPrompt = v.b }},
	{"continue_final_message", kindBool, func(r *Request, v *node) { r.ContinueFinalMessage = v.b }},
	{"add_special_tokens", kindBool, func(r *Request, v *node) { b := v.b; r.AddSpecialTokens = &b }},
	{"documents", kindArray, func(r *Request, v *node) { r.documents = v }},
	{"reasoning_effort", kindString, func(r *Request, v *node) { r.ReasoningEffort = v.str }},
	{"cache_salt", kindString, func(r *Request, v *node) { r.CacheSalt = v.str }},
	{"mm_processor_kwargs", kindObject, func(r *Request, v *node) { r.MMProcessorKwargs = len(v.keys) > 0 }},
	{"chat_template_kwargs", kindObject, func(r *Request, v *node) { r.chatTemplateKwargs = v }},
	{"chat_template", kindString, func(r *Request, v *node) { r.OwnChatTemplate = true }},
}

// fill reads the top-level members and walks the messages. It returns the first schema problem.
func (r *Request) fill() error {
	root := r.root
	for _, m := range optionalMembers {
		v := root.get(m.name)
		if v.isNull() {
			continue
		}
		if v.kind != m.want {
			return fmt.Errorf("%s is %s, not %s", m.name, v.kind, m.want.withArticle())
		}
		m.set(r, v)
	}
	if v := root.get("tools"); !v.isNull() {
		if v.kind != kindArray {
			return fmt.Errorf("tools is %s, not an array", v.kind)
		}
		for i, t := range v.items {
			if err := checkTool(t); err != nil {
				return fmt.Errorf("tools[%d]: %w", i, err)
			}
		}
		r.tools = v
	}
	if v := root.get("prompt"); v != nil {
		r.HasPrompt = true
		if err := r.readPrompt(v); err != nil {
			return err
		}
	}
	msgs := root.get("messages")
	if msgs == nil {
		if r.HasPrompt {
			return nil
		}
		return errors.New("no messages")
	}
	r.HasMessages = true
	if msgs.kind != kindArray {
		return fmt.Errorf("messages is %s, not an array", msgs.kind)
	}
	r.messages = msgs
	for i, m := range msgs.items {
		if err := r.scanMessage(i, m); err != nil {
			return fmt.Errorf("messages[%d]: %w", i, err)
		}
	}
	return nil
}

// scanMessage checks one message's shape and records its media parts and flags.
func (r *Request) scanMessage(mi int, m *node) error {
	if m.kind != kindObject {
		return fmt.Errorf("message is %s, not an object", m.kind)
	}
	role := m.get("role")
	if role == nil || role.kind != kindString {
		return errors.New("role missing or not a string")
	}
	c := m.get("content")
	switch {
	case c.isNull(), c.kind == kindString:
		return nil
	case c.kind != kindArray:
		return fmt.Errorf("content is %s, not a string, array or null", c.kind)
	}
	prevVideo := false
	for pi, p := range c.items {
		pp, err := resolvePart(p)
		if err != nil {
			return fmt.Errorf("content[%d]: %w", pi, err)
		}
		if pp.kind == partSkip {
			continue // vLLM drops it: it does not separate its neighbours
		}
		isVideo := false
		switch pp.kind {
		case partImage, partVideo:
			mp := pp.media
			mp.Message, mp.Index = mi, pi
			if mp.HasUUID {
				r.ClientUUID = true
			}
			r.Media = append(r.Media, mp)
			isVideo = pp.kind == partVideo
			if isVideo && prevVideo {
				r.AdjacentVideos = true
			}
		case partAudio:
			r.HasAudio = true
		}
		prevVideo = isVideo
	}
	return nil
}
