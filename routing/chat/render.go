package chat

import (
	"errors"
	"fmt"

	"github.com/ardanlabs/jinja"
)

// ErrRender is wrapped by every Render error: the template raised, or the request's messages
// cannot be converted (unknown role, content of the wrong type). The handler maps it to
// template_error.
var ErrRender = errors.New("rendering chat template")

// reservedVars are render variables chat_template_kwargs may not override (vLLM passes them as
// named arguments).
var reservedVars = map[string]bool{"messages": true, "tools": true, "documents": true}

// Render renders req's messages through the template the way vLLM's chat endpoint does: the
// messages converted as described on conversation, tools as sent (None when absent),
// documents None, add_generation_prompt from the request (default true), the special tokens,
// then chat_template_kwargs (which override everything but messages, tools and documents).
// The result is the prompt text with media placeholders unexpanded.
func (t *Template) Render(req *Request) (string, error) {
	if req.SchemaErr != nil {
		return "", fmt.Errorf("%w: %w", ErrRender, req.SchemaErr)
	}
	c := &converter{}
	msgs, err := t.conversation(req, c)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrRender, err)
	}
	tools := jinja.None()
	if req.tools != nil {
		tools = c.value(req.tools)
	}
	return t.render(c, msgs, tools, req.AddGenerationPrompt, req.chatTemplateKwargs)
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
	return t.render(c, c.value(mn), tools, in.AddGenerationPrompt, kw)
}

func (t *Template) render(c *converter, msgs, tools jinja.Value, addGen bool, kwargs *node) (out string, err error) {
	data := make(map[string]jinja.Value, len(t.special)+8)
	for k, v := range t.special {
		data[k] = v
	}
	data["add_generation_prompt"] = jinja.NewBool(addGen)
	if kwargs != nil {
		for i, k := range kwargs.keys {
			if !reservedVars[k] {
				data[k] = c.value(kwargs.vals[i])
			}
		}
	}
	data["messages"] = msgs
	data["tools"] = tools
	data["documents"] = jinja.None()
	if c.big && c.sawMark {
		return "", fmt.Errorf("%w: %w", ErrRender, errReservedRune)
	}
	defer func() {
		if p := recover(); p != nil {
			out, err = "", fmt.Errorf("%w: template engine panic: %v", ErrRender, p)
		}
	}()
	out, err = t.tmpl.RenderValues(data)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrRender, err)
	}
	if c.big {
		out = restoreBigInts(out)
	}
	return out, nil
}
