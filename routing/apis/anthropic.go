package apis

import (
	"fmt"
	"time"
)

// AnthropicOptions are the two server settings of vLLM's Messages API that change the prompt.
type AnthropicOptions struct {
	// InlineSystem is where system messages inside `messages` go: "preserve" (default: kept in
	// place as system turns) or "fold" (merged into a neighbouring message). vLLM's option
	// `inline_system` (auto probes the chat template once; kvroute follows the resolved value the
	// operator or the worker declares).
	InlineSystem string
	// DisabledThinkingEffort is the reasoning_effort `thinking: {"type":"disabled"}` maps to:
	// "none" (default) or "low" (vLLM's probe picks low when the template ignores or rejects none).
	DisabledThinkingEffort string
}

// FromAnthropic converts an Anthropic Messages request body into the chat form vLLM builds
// (AnthropicServingMessages.to_chat_completion_request, vllm/entrypoints/anthropic/serving.py at
// the commit named in doc.go). A request vLLM refuses gives an *Error.
func FromAnthropic(body []byte, opt AnthropicOptions) (*ChatForm, error) {
	req, err := Parse(body)
	if err != nil {
		return nil, invalid("body is not JSON: %v", err)
	}
	if err := validateAnthropic(req); err != nil {
		return nil, err
	}
	msgs := req.Get("messages").Arr
	mode := opt.InlineSystem
	if mode != "fold" {
		mode = "preserve"
	}
	leading, rest := normalizeInlineSystem(req, msgs, mode)

	var out []*Value
	if sys := joinNonEmpty(systemPromptText(req), leading); sys != "" {
		out = append(out, Obj(M("role", Str("system")), M("content", Str(sys))))
	}
	for _, m := range rest {
		out = convertAnthropicMessage(m, out)
	}
	f := anthropicForm(req, len(body), opt)
	f.Messages = out
	return f, nil
}

// anthropicForm is the chat form of a checked Messages request without its messages. size is
// the body's length.
func anthropicForm(req *Value, size int, opt AnthropicOptions) *ChatForm {
	f := &ChatForm{Model: req.Get("model").Str, AddGenerationPrompt: true, sizeHint: size}
	f.ChatTemplateKwargs = nullToNil(req.Get("chat_template_kwargs"))
	f.CacheSalt = nullToNil(req.Get("cache_salt"))
	if e := req.Get("output_config").Get("effort"); e.IsStr() {
		f.ReasoningEffort = Str(e.Str)
	}
	if th := req.Get("thinking"); th.IsObj() && th.Get("type").StrOr("") == "disabled" {
		eff := opt.DisabledThinkingEffort
		if eff != "low" {
			eff = "none"
		}
		f.ReasoningEffort = Str(eff)
	}
	if tc := req.Get("tool_choice"); !tc.IsNull() {
		switch tc.Get("type").StrOr("") {
		case "auto":
			f.ToolChoice = Str("auto")
		case "any":
			f.ToolChoice = Str("required")
		case "none":
			f.ToolChoice = Str("none")
		case "tool":
			f.ToolChoice = Obj(M("type", Str("function")), M("function", Obj(M("name", Str(tc.Get("name").Str)))))
		}
	}
	if tools := req.Get("tools"); tools.IsArr() {
		list := Arr()
		for _, t := range tools.Arr {
			list.Arr = append(list.Arr, functionTool(t.Get("name"), t.Get("description"), inputSchema(t.Get("input_schema")), t.Get("strict"), t.Get("defer_loading")))
		}
		if f.ToolChoice == nil {
			f.ToolChoice = Str("auto")
		}
		f.Tools = list
	}
	return f
}

// inputSchema is the tool's input_schema as vLLM's protocol validator leaves it: "type":
// "object" appended when the schema has no type.
func inputSchema(s *Value) *Value {
	if !s.IsObj() || s.Has("type") {
		return s
	}
	c := s.Clone()
	c.Set("type", Str("object"))
	return c
}

// functionTool is ChatCompletionToolsParam's dump: {"type":"function","function":{name,
// description, parameters[, strict][, defer_loading]}} (FunctionDefinition's serializer leaves
// strict and defer_loading out when null; description and parameters stay as null).
func functionTool(name, desc, params, strict, deferLoading *Value) *Value {
	fn := Obj(M("name", Str(name.StrOr(""))), M("description", orNull(desc)), M("parameters", orNull(params)))
	if !strict.IsNull() {
		fn.Set("strict", strict)
	}
	if !deferLoading.IsNull() {
		fn.Set("defer_loading", deferLoading)
	}
	return Obj(M("type", Str("function")), M("function", fn))
}

// convertAnthropicMessage is _convert_messages for one message: it appends the message's chat
// messages (tool messages of a user's tool_results first) to out.
func convertAnthropicMessage(m *Value, out []*Value) []*Value {
	role := m.Get("role").Str
	content := m.Get("content")
	if role == "system" {
		if t := systemText(m); t != "" {
			out = append(out, Obj(M("role", Str("system")), M("content", Str(t))))
		}
		return out
	}
	msg := Obj(M("role", Str(role)))
	if content.IsStr() {
		msg.Set("content", Str(content.Str))
		return append(out, msg)
	}
	var parts, calls []*Value
	var reasoning []string
	hasReasoning := false
	for _, b := range content.Arr {
		switch b.Get("type").Str {
		case "text":
			if t := b.Get("text"); t.IsStr() && t.Str != "" {
				parts = append(parts, textPart(t.Str))
			}
		case "image":
			if src := b.Get("source"); src.Truthy() {
				parts = append(parts, imagePart(imageSourceURL(src)))
			}
		case "thinking":
			if t := b.Get("thinking"); !t.IsNull() {
				reasoning = append(reasoning, t.StrOr(""))
				hasReasoning = true
			}
		case "tool_use":
			calls = append(calls, toolUseCall(b))
		case "tool_result":
			if role == "user" {
				out = appendUserToolResult(b, out)
			} else {
				text := ""
				if c := b.Get("content"); c.Truthy() {
					text = PyStr(c)
				}
				parts = append(parts, textPart("Tool result: "+text))
			}
		}
	}
	if hasReasoning {
		r := ""
		for _, s := range reasoning {
			r += s
		}
		msg.Set("reasoning", Str(r))
	}
	if len(calls) > 0 {
		msg.Set("tool_calls", Arr(calls...))
	}
	switch {
	case len(parts) == 1 && parts[0].Get("type").Str == "text":
		msg.Set("content", parts[0].Get("text"))
	case len(parts) > 0:
		msg.Set("content", Arr(parts...))
	}
	if role == "user" && !msg.Has("content") {
		return out // a user message of only tool_results (or nothing) leaves only its tool messages
	}
	return append(out, msg)
}

func textPart(s string) *Value { return Obj(M("type", Str("text")), M("text", Str(s))) }

func imagePart(url string) *Value {
	return Obj(M("type", Str("image_url")), M("image_url", Obj(M("url", Str(url)))))
}

// imageSourceURL is _convert_image_source_to_url: a url source's url, else a data URL of the
// base64 data (media_type default image/jpeg).
func imageSourceURL(src *Value) string {
	if src.Get("type").StrOr("") == "url" {
		return src.Get("url").StrOr("")
	}
	return "data:" + src.Get("media_type").StrOr("image/jpeg") + ";base64," + src.Get("data").StrOr("")
}

// toolUseCall is _convert_tool_use_block: arguments are Python's json.dumps of the input. A
// tool_use without an id gets vLLM's clock id, call_<unix seconds> (not reproducible: such a
// turn's later prompt differs from what the worker built).
func toolUseCall(b *Value) *Value {
	id := b.Get("id").StrOr("")
	if id == "" {
		id = fmt.Sprintf("call_%d", time.Now().Unix())
	}
	args := "{}"
	if in := b.Get("input"); in.Truthy() {
		args = PyDumps(in)
	}
	return Obj(M("id", Str(id)), M("type", Str("function")),
		M("function", Obj(M("name", Str(b.Get("name").StrOr(""))), M("arguments", Str(args)))))
}

// appendUserToolResult is _convert_user_tool_result: a tool message with the result's text (text
// items joined with "\n"), then a user message with its images, then a tool message with its
// tool_reference items.
func appendUserToolResult(b *Value, out []*Value) []*Value {
	text := ""
	var images []*Value
	var refs []*Value
	c := b.Get("content")
	switch {
	case c.IsStr():
		text = c.Str
	case c.IsArr():
		var texts []string
		for _, it := range c.Arr {
			if !it.IsObj() {
				continue
			}
			switch it.Get("type").StrOr("") {
			case "text":
				texts = append(texts, it.Get("text").StrOr(""))
			case "image":
				src := it.Get("source")
				if src == nil {
					src = Obj()
				}
				if u := imageSourceURL(src); u != "" {
					images = append(images, imagePart(u))
				}
			case "tool_reference":
				name := it.Get("tool_name")
				if !name.Truthy() {
					name = it.Get("name")
				}
				if name.Truthy() {
					refs = append(refs, Obj(M("type", Str("tool_reference")), M("name", name)))
				}
			}
		}
		for i, t := range texts {
			if i > 0 {
				text += "\n"
			}
			text += t
		}
	}
	id := b.Get("tool_use_id").StrOr("")
	out = append(out, Obj(M("role", Str("tool")), M("tool_call_id", Str(id)), M("content", Str(text))))
	if len(images) > 0 {
		out = append(out, Obj(M("role", Str("user")), M("content", Arr(images...))))
	}
	if len(refs) > 0 {
		out = append(out, Obj(M("role", Str("tool")), M("tool_call_id", Str(id)), M("content", Arr(refs...))))
	}
	return out
}
