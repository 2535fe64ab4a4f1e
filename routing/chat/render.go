package chat

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kvroute/kvroute/internal/jinja"
)

// ErrRender is wrapped by every Render error: the template raised, or the request's messages
// cannot be converted (unknown role, content of the wrong type). The handler maps it to
// template_error.
var ErrRender = errors.New("rendering chat template")

// rejectedVars are chat_template_kwargs that vLLM refuses (chat_template, tokenize) or that
// collide with apply_chat_template's own arguments (messages/conversation, tools): the request
// fails on the worker, so it is a render error here.
var rejectedVars = map[string]bool{"chat_template": true, "tokenize": true, "messages": true, "conversation": true, "tools": true}

// Render renders req's messages through the template the way vLLM's chat endpoint does
// (transformers' apply_chat_template under vLLM's renderer): messages converted as described on
// conversation; tools as vLLM's tool.model_dump() gives them (toolValue), None when absent; the
// tokenizer's special tokens, then chat_template_kwargs over them; then the request's own
// add_generation_prompt (default true), documents and reasoning_effort over those (vLLM's
// merge_kwargs: an absent field, or reasoning_effort "auto", leaves the kwargs value). With
// continue_final_message the output is cut after the final message's text. The result is the
// prompt text with media placeholders unexpanded.
func (t *Template) Render(req *Request) (string, error) {
	p, err := t.renderRequest(req, false)
	return p.String(), err
}

// Prompt is a rendered prompt as pieces (internal/jinja's output pieces): the prompt text is their
// texts joined (String). Each chat message iteration the template cache replayed is its own
// piece, sharing the recorded text, with Replayed set and the recording's Note, where the
// tokenizer keeps such a piece's ids and the router their block hashes. It is given as it is to
// the tokenizer (tokenizer.Tokenizer.EncodePiecesRuns, through model.Model.EncodePromptRuns).
type Prompt []jinja.Piece

// String joins the pieces' texts.
func (p Prompt) String() string {
	switch len(p) {
	case 0:
		return ""
	case 1:
		return p[0].Text
	}
	n := 0
	for _, x := range p {
		n += len(x.Text)
	}
	var sb strings.Builder
	sb.Grow(n)
	for _, x := range p {
		sb.WriteString(x.Text)
	}
	return sb.String()
}

// RenderPrompt is Render returning the prompt as pieces, without joining them: a long
// conversation's earlier turns are not copied. Errors are Render's. A render whose output is
// post-processed (continue_final_message's cut, integers beyond int64) is one piece.
func (t *Template) RenderPrompt(req *Request) (Prompt, error) {
	return t.renderRequest(req, true)
}

func (t *Template) renderRequest(req *Request, split bool) (Prompt, error) {
	if req.SchemaErr != nil {
		return nil, fmt.Errorf("%w: %w", ErrRender, req.SchemaErr)
	}
	if req.OwnChatTemplate {
		return nil, fmt.Errorf("%w: the request sets its own chat_template; kvroute renders the model's template only, so it cannot predict this prompt", ErrRender)
	}
	c := &converter{}
	msgs, err := t.conversation(req, c)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRender, err)
	}
	if req.ContinueFinalMessage && req.AddGenerationPrompt {
		return nil, fmt.Errorf("%w: continue_final_message and add_generation_prompt are both set", ErrRender)
	}
	tools := jinja.None()
	if req.tools != nil {
		items := make([]jinja.Value, len(req.tools.items))
		for i, tn := range req.tools.items {
			items[i] = t.cachedTool(req, tn, c)
		}
		tools = jinja.NewList(items)
	}
	docs := jinja.None()
	if req.documents != nil {
		docs = c.value(req.documents)
	}
	out, err := t.renderPieces(c, msgs, tools, docs, req.AddGenerationPrompt, req.ReasoningEffort, req.chatTemplateKwargs, split && !req.ContinueFinalMessage)
	if err != nil || !req.ContinueFinalMessage {
		return out, err
	}
	cut, err := continueFinal(out.String(), msgs)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRender, err)
	}
	return Prompt{{Text: cut}}, nil
}

// renderSize is the output buffer a render starts with: the converted strings (message texts,
// tools, documents, kwargs: what a chat template prints) plus 64 bytes per string and 4 KiB for
// the template's own text (role headers, special tokens). A larger output grows the buffer as
// before (one 1.25× step covers most overshoots); the size only saves the engine's regrowth
// from zero (about five times the prompt's length allocated and copied).
func (c *converter) renderSize() int { return c.strBytes + 64*c.strs + 4096 }

// continueFinal cuts the rendered chat right after the final message's text, the way
// transformers' render_jinja_template does for continue_final_message: the text is the final
// message's content string, or the last part of its content list that has a "text" key; the
// cut is after its last occurrence (whitespace-stripped) in the output, keeping the message's
// own leading/trailing spacing when the template kept it.
func continueFinal(out string, msgs jinja.Value) (string, error) {
	list := msgs.AsList()
	if list.Len() == 0 {
		return "", errors.New("continue_final_message with no messages")
	}
	last := list.Get(list.Len() - 1)
	content, _ := last.AsDict().Get("content")
	var final string
	switch {
	case content.IsString():
		final = content.AsString()
	case content.IsList():
		found := false
		items := content.AsList().Items
		for i := len(items) - 1; i >= 0 && !found; i-- {
			if !items[i].IsDict() {
				continue
			}
			if v, ok := items[i].AsDict().Get("text"); ok {
				if !v.IsString() {
					return "", errors.New("continue_final_message: the final text part is not a string")
				}
				final, found = v.AsString(), true
			}
		}
		if !found {
			return "", errors.New("continue_final_message is set but the final message has no text to continue")
		}
	default:
		return "", errors.New("continue_final_message: the final message has no content")
	}
	stripped := strings.TrimFunc(final, pyIsSpace)
	loc := strings.LastIndex(out, stripped)
	if loc < 0 {
		return "", errors.New("continue_final_message is set but the final message does not appear in the rendered chat")
	}
	left := strings.TrimLeftFunc(final, pyIsSpace)
	if end := loc + len(left); end <= len(out) && out[loc:end] == final {
		return out[:end], nil
	}
	return out[:loc+len(stripped)], nil
}

// Input is a template input already in the shape the template receives (no vLLM
// conversion): Messages and Tools are JSON arrays (Tools may be nil or "null"), Kwargs a JSON
// object of extra variables (may be nil).
type Input struct {
	Messages            []byte
	Tools               []byte
	AddGenerationPrompt bool
	Kwargs              []byte
}

// RenderInput renders in as given. JSON is decoded order-preserving with Python's number
// semantics (int vs float kept, integers beyond int64 printed exactly).
func (t *Template) RenderInput(in Input) (string, error) {
	c := &converter{}
	mn, err := parseJSON(in.Messages, false)
	if err != nil {
		return "", fmt.Errorf("%w: decoding messages: %w", ErrRender, err)
	}
	if mn.kind != kindArray {
		return "", fmt.Errorf("%w: messages is %s, not an array", ErrRender, mn.kind)
	}
	tools := jinja.None()
	if len(in.Tools) > 0 {
		tn, err := parseJSON(in.Tools, false)
		if err != nil {
			return "", fmt.Errorf("%w: decoding tools: %w", ErrRender, err)
		}
		tools = c.value(tn)
	}
	var kw *node
	if len(in.Kwargs) > 0 {
		if kw, err = parseJSON(in.Kwargs, false); err != nil {
			return "", fmt.Errorf("%w: decoding kwargs: %w", ErrRender, err)
		}
		if kw.kind != kindObject {
			return "", fmt.Errorf("%w: kwargs is %s, not an object", ErrRender, kw.kind)
		}
	}
	return t.render(c, c.value(mn), tools, jinja.None(), in.AddGenerationPrompt, "", kw)
}

func (t *Template) render(c *converter, msgs, tools, docs jinja.Value, addGen bool, reasoningEffort string, kwargs *node) (string, error) {
	p, err := t.renderPieces(c, msgs, tools, docs, addGen, reasoningEffort, kwargs, false)
	return p.String(), err
}

// renderPieces renders with the template's variables set as render's comment says; split keeps
// replayed iterations as their own pieces (else the output is one piece).
func (t *Template) renderPieces(c *converter, msgs, tools, docs jinja.Value, addGen bool, reasoningEffort string, kwargs *node, split bool) (out Prompt, err error) {
	data := make(map[string]jinja.Value, len(t.special)+8)
	for k, v := range t.special {
		data[k] = v
	}
	if kwargs != nil {
		for i, k := range kwargs.keys {
			if rejectedVars[k] {
				return nil, fmt.Errorf("%w: chat_template_kwargs may not set %q", ErrRender, k)
			}
			data[k] = c.value(kwargs.vals[i])
		}
	}
	// vLLM merges the request's own fields over chat_template_kwargs (renderers/params.py
	// merge_kwargs: a None or "auto" field leaves the kwargs value).
	data["add_generation_prompt"] = jinja.NewBool(addGen)
	if !docs.IsNone() {
		data["documents"] = docs
	} else if _, ok := data["documents"]; !ok {
		data["documents"] = jinja.None()
	}
	if reasoningEffort != "" && reasoningEffort != "auto" {
		data["reasoning_effort"] = jinja.NewString(reasoningEffort)
	}
	data["messages"] = msgs
	data["tools"] = tools
	if c.big && c.sawMark {
		return nil, fmt.Errorf("%w: %w", ErrRender, errReservedRune)
	}
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, fmt.Errorf("%w: template engine panic: %v", ErrRender, p)
		}
	}()
	if split && !c.big {
		// The buffer holds what is written, not what is replayed: the prompt's size less the text
		// recorded for the cached messages (a cold prompt gets its whole size, as Render does; a
		// conversation's replayed turns take no room).
		pieces, err := t.tmpl.RenderPieces(data, max(c.renderSize()-c.recorded, 4096))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrRender, err)
		}
		return Prompt(pieces), nil
	}
	text, err := t.tmpl.RenderValuesSize(data, c.renderSize())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRender, err)
	}
	if c.big {
		text = restoreBigInts(text)
	}
	return Prompt{{Text: text}}, nil
}
