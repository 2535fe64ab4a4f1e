package apis

import "bytes"

// ChatForm is the chat-completions request vLLM builds from an Anthropic or Responses request:
// the fields that reach the chat template (the golden vectors' `expected` shape). A nil pointer
// field is JSON null.
type ChatForm struct {
	Model                string
	Messages             []*Value
	Tools                *Value // a list, or nil
	ToolChoice           *Value
	ChatTemplateKwargs   *Value // an object, or nil
	AddGenerationPrompt  bool
	ContinueFinalMessage bool
	ReasoningEffort      *Value // a string, or nil
	CacheSalt            *Value // a string, or nil

	// sizeHint is the size of the request the form was built from: Body's buffer starts there.
	sizeHint int
}

// Expected is the form as the golden vectors write it (`expected`).
func (f *ChatForm) Expected() *Value {
	msgs := Arr(f.Messages...)
	return Obj(
		M("messages", msgs),
		M("tools", orNull(f.Tools)),
		M("tool_choice", orNull(f.ToolChoice)),
		M("chat_template_kwargs", orNull(f.ChatTemplateKwargs)),
		M("add_generation_prompt", Bool(f.AddGenerationPrompt)),
		M("continue_final_message", Bool(f.ContinueFinalMessage)),
		M("reasoning_effort", orNull(f.ReasoningEffort)),
		M("cache_salt", orNull(f.CacheSalt)),
	)
}

// FormFromExpected reads a golden vector's `expected` object back into a ChatForm.
func FormFromExpected(model string, e *Value) *ChatForm {
	f := &ChatForm{Model: model, AddGenerationPrompt: true}
	if m := e.Get("messages"); m.IsArr() {
		f.Messages = m.Arr
	}
	f.Tools = nullToNil(e.Get("tools"))
	f.ToolChoice = nullToNil(e.Get("tool_choice"))
	f.ChatTemplateKwargs = nullToNil(e.Get("chat_template_kwargs"))
	if v := e.Get("add_generation_prompt"); v != nil && v.Kind == KindBool {
		f.AddGenerationPrompt = v.Bool
	}
	if v := e.Get("continue_final_message"); v != nil && v.Kind == KindBool {
		f.ContinueFinalMessage = v.Bool
	}
	f.ReasoningEffort = nullToNil(e.Get("reasoning_effort"))
	f.CacheSalt = nullToNil(e.Get("cache_salt"))
	return f
}

// Body is the /v1/chat/completions body of the form, as vLLM's ChatCompletionRequest holds it
// when it renders: build_chat_params adds enable_thinking = (reasoning_effort != "none") to the
// template kwargs unless they set it (vllm/entrypoints/openai/chat_completion/protocol.py), which
// kvroute's chat path does not do by itself. Null fields are left out (the chat defaults are
// vLLM's: add_generation_prompt true, continue_final_message false).
func (f *ChatForm) Body() []byte {
	var buf bytes.Buffer
	buf.Grow(f.sizeHint + 4096)
	f.writeBody(&buf, func(b *bytes.Buffer) { Arr(f.Messages...).write(b) })
	return buf.Bytes()
}

// writeBody writes the chat body with messages written by msgs (a JSON list): Body's fields in
// Body's order, so the converter's cached messages (convert.go) give Body's bytes.
func (f *ChatForm) writeBody(buf *bytes.Buffer, msgs func(*bytes.Buffer)) {
	buf.WriteString(`{"model":`)
	writeGoString(buf, f.Model)
	buf.WriteString(`,"messages":`)
	msgs(buf)
	field := func(k string, v *Value) {
		buf.WriteByte(',')
		writeGoString(buf, k)
		buf.WriteByte(':')
		v.write(buf)
	}
	if f.Tools != nil {
		field("tools", f.Tools)
	}
	if f.ToolChoice != nil {
		field("tool_choice", f.ToolChoice)
	}
	kw := f.ChatTemplateKwargs
	if f.ReasoningEffort.IsStr() && !kw.Has("enable_thinking") {
		if kw == nil {
			kw = Obj()
		} else {
			kw = kw.Clone()
		}
		kw.Set("enable_thinking", Bool(f.ReasoningEffort.Str != "none"))
	}
	if kw != nil {
		field("chat_template_kwargs", kw)
	}
	field("add_generation_prompt", Bool(f.AddGenerationPrompt))
	field("continue_final_message", Bool(f.ContinueFinalMessage))
	if f.ReasoningEffort != nil {
		field("reasoning_effort", f.ReasoningEffort)
	}
	if f.CacheSalt != nil {
		field("cache_salt", f.CacheSalt)
	}
	buf.WriteByte('}')
}

func orNull(v *Value) *Value {
	if v == nil {
		return Null()
	}
	return v
}

func nullToNil(v *Value) *Value {
	if v.IsNull() {
		return nil
	}
	return v
}
