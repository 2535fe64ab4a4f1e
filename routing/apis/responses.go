package apis

// The Responses API's chat form: vllm/entrypoints/openai/responses/utils.py
// (construct_input_messages, construct_chat_messages_with_tool_call,
// should_continue_final_message), responses/protocol.py (input-item normalisation,
// build_chat_params, check_tool_usage) and responses/serving.py (_make_request,
// _validate_create_responses_input) at the commits named in doc.go. Non-harmony models only.

// ResponsesOptions are the server settings of vLLM's Responses API that change what it accepts.
type ResponsesOptions struct {
	// StoreEnabled is VLLM_ENABLE_RESPONSES_API_STORE=1 on the workers: without it a request with
	// background true is refused.
	StoreEnabled bool
}

// Responses is a converted Responses request.
type Responses struct {
	Form *ChatForm
	// PreviousResponseID is the request's previous_response_id ("" when absent): vLLM inserts that
	// response's stored conversation after the instructions; only the worker that stored it has it.
	PreviousResponseID string
	// Store is the request's store (default true): a stored response stays on its worker.
	Store bool
}

// FromResponses converts a Responses request body into the chat form vLLM builds (with only
// the new items of a previous_response_id turn). A request vLLM refuses gives an *Error; the
// Responses is then still returned (without Form) when the body is a JSON object, so its
// previous_response_id and store are known.
func FromResponses(body []byte, opt ResponsesOptions) (*Responses, error) {
	req, err := Parse(body)
	if err != nil {
		return nil, invalid("body is not JSON: %v", err)
	}
	if !req.IsObj() {
		return nil, invalid("the body is not an object")
	}
	out, f, err := responsesForm(req, len(body), opt)
	if err != nil {
		return out, err
	}
	in := req.Get("input")
	if in.IsStr() {
		f.Messages = append(f.Messages, Obj(M("role", Str("user")), M("content", Str(in.Str))))
	} else {
		items, err := normalizeItems(in.Arr)
		if err != nil {
			return out, err
		}
		for _, it := range items {
			if m := messageFromItem(it, f.Messages); m != nil {
				f.Messages = append(f.Messages, m)
			}
		}
		if continueFinal(items) {
			f.ContinueFinalMessage, f.AddGenerationPrompt = true, false
		}
	}
	out.Form = f
	return out, nil
}

// responsesForm reads and checks everything of a Responses request but its input: the form
// holds the instructions' system message (when there are instructions) and every field but the
// input's messages. size is the body's length.
func responsesForm(req *Value, size int, opt ResponsesOptions) (*Responses, *ChatForm, error) {
	out := &Responses{Store: true}
	if s := req.Get("store"); s != nil && s.Kind == KindBool {
		out.Store = s.Bool
	}
	if p := req.Get("previous_response_id"); p.IsStr() && p.Str != "" {
		out.PreviousResponseID = p.Str
	}
	if err := validateResponses(req, out.Store, opt); err != nil {
		return out, nil, err
	}
	tools, names, err := responsesTools(req.Get("tools"))
	if err != nil {
		return out, nil, err
	}
	f := &ChatForm{Model: req.Get("model").StrOr(""), Tools: tools, AddGenerationPrompt: true, sizeHint: size}
	if f.ToolChoice, err = responsesToolChoice(req.Get("tool_choice"), req.Get("tools"), names); err != nil {
		return out, nil, err
	}
	if ins := req.Get("instructions"); ins.Truthy() && ins.IsStr() {
		f.Messages = append(f.Messages, Obj(M("role", Str("system")), M("content", Str(ins.Str))))
	}
	f.ChatTemplateKwargs = nullToNil(req.Get("chat_template_kwargs"))
	if eff := req.Get("reasoning").Get("effort"); eff.IsStr() {
		f.ReasoningEffort = Str(eff.Str)
		if !f.ChatTemplateKwargs.Has("enable_thinking") {
			kw := Obj()
			if f.ChatTemplateKwargs != nil {
				kw = f.ChatTemplateKwargs.Clone()
			}
			kw.Set("enable_thinking", Bool(eff.Str != "none"))
			f.ChatTemplateKwargs = kw
		}
	}
	f.CacheSalt = nullToNil(req.Get("cache_salt"))
	return out, f, nil
}

func validateResponses(req *Value, store bool, opt ResponsesOptions) error {
	in := req.Get("input")
	if in == nil {
		return invalid("input: field required")
	}
	if !in.IsStr() && !in.IsArr() {
		return invalid("input must be a string or a list of items")
	}
	if m := req.Get("model"); !m.IsNull() && !m.IsStr() {
		return invalid("model must be a string")
	}
	if cs := req.Get("cache_salt"); !cs.IsNull() && (!cs.IsStr() || cs.Str == "") {
		return invalid("cache_salt: String should have at least 1 character")
	}
	if kw := req.Get("chat_template_kwargs"); !kw.IsNull() && !kw.IsObj() {
		return invalid("chat_template_kwargs must be an object")
	}
	if ins := req.Get("instructions"); !ins.IsNull() && !ins.IsStr() {
		return invalid("instructions must be a string")
	}
	if r := req.Get("reasoning"); !r.IsNull() {
		if !r.IsObj() {
			return invalid("reasoning must be an object")
		}
		if e := r.Get("effort"); !e.IsNull() {
			switch e.StrOr("") {
			case "none", "minimal", "low", "medium", "high", "xhigh":
			default:
				return invalid("reasoning.effort invalid")
			}
		}
	}
	if bg := req.Get("background"); bg != nil && bg.Kind == KindBool && bg.Bool {
		if !store {
			return vllmInvalid("background can only be used when `store` is true")
		}
		if !opt.StoreEnabled {
			return &Error{Class: ClassInvalidRequest, Msg: "This vLLM engine does not support `store=True` and therefore does not support the background mode (unless VLLM_ENABLE_RESPONSES_API_STORE=1)."}
		}
	}
	if p := req.Get("prompt"); !p.IsNull() {
		return vllmInvalid("prompt template is not supported")
	}
	return nil
}

// item is one input item after vLLM's validation: sdk marks the items pydantic turns into
// openai SDK objects (function calls, reasoning items, assistant output messages); the others
// stay dicts with only their TypedDict's keys.
type item struct {
	v    *Value
	kind string // "function_call", "reasoning", "output_message", "function_call_output", "assistant", "message", "other"
}

func normalizeItems(in []*Value) ([]item, error) {
	out := make([]item, 0, len(in))
	for _, v := range in {
		if !v.IsObj() {
			return nil, invalid("input items must be objects")
		}
		typ := v.Get("type").StrOr("")
		switch typ {
		case "function_call":
			for _, k := range []string{"call_id", "name", "arguments"} {
				if !v.Get(k).IsStr() {
					return nil, invalid("function_call item needs call_id, name and arguments (strings)")
				}
			}
			out = append(out, item{v, "function_call"})
		case "reasoning":
			if v.Get("encrypted_content").Truthy() {
				return nil, &Error{Class: ClassValueError, Msg: "Encrypted content is not supported."}
			}
			out = append(out, item{v, "reasoning"})
		case "function_call_output":
			if !v.Get("call_id").IsStr() {
				return nil, invalid("function_call_output item needs call_id")
			}
			out = append(out, item{v, "function_call_output"})
		case "", "message":
			r := role(v)
			switch r {
			case "user", "system", "developer", "assistant":
			default:
				return nil, invalid("message role '%s' not accepted", r)
			}
			if err := validateParts(v.Get("content")); err != nil {
				return nil, err
			}
			if r == "assistant" && typ == "message" && outputTextContent(v.Get("content")) {
				out = append(out, item{v, "output_message"})
				continue
			}
			kept := Obj()
			for _, k := range []string{"content", "role", "type"} {
				if e := v.Get(k); e != nil {
					kept.Set(k, e)
				}
			}
			if typ == "message" && r != "assistant" && v.Has("status") {
				kept.Set("status", v.Get("status")) // the Message TypedDict has status; EasyInputMessage has not
			}
			if r == "assistant" {
				out = append(out, item{kept, "assistant"})
			} else {
				out = append(out, item{kept, "message"})
			}
		default:
			out = append(out, item{v, "other"})
		}
	}
	return out, nil
}

func outputTextContent(c *Value) bool {
	if !c.IsArr() {
		return false
	}
	for _, p := range c.Arr {
		if t := p.Get("type").StrOr(""); t != "output_text" && t != "refusal" {
			return false
		}
	}
	return true
}

// validateParts checks the content parts the openai TypedDicts require fields of.
func validateParts(c *Value) error {
	if c.IsStr() {
		return nil
	}
	if !c.IsArr() {
		return invalid("message content must be a string or a list of parts")
	}
	for _, p := range c.Arr {
		if !p.IsObj() {
			return invalid("content parts must be objects")
		}
		switch p.Get("type").StrOr("") {
		case "input_image":
			if d := p.Get("detail"); !d.IsStr() {
				return invalid("input_image.detail is required")
			}
		case "input_text", "output_text":
			if !p.Get("text").IsStr() {
				return invalid("text parts need text")
			}
		}
	}
	return nil
}

// messageFromItem is _construct_message_from_response_item: it returns a new message, or nil
// after merging the item into the previous assistant message.
func messageFromItem(it item, prev []*Value) *Value {
	var pa *Value
	if n := len(prev); n > 0 && role(prev[n-1]) == "assistant" {
		pa = prev[n-1]
	}
	v := it.v
	switch it.kind {
	case "function_call":
		name := v.Get("name").Str
		if ns := v.Get("namespace"); ns.Truthy() && ns.IsStr() {
			name = ns.Str + "__" + name
		}
		call := Obj(M("id", Str(v.Get("call_id").Str)),
			M("function", Obj(M("name", Str(name)), M("arguments", Str(v.Get("arguments").Str)))),
			M("type", Str("function")))
		if pa != nil {
			if tc := pa.Get("tool_calls"); tc == nil || tc.IsNull() {
				pa.Set("tool_calls", Arr(call))
				return nil
			} else if tc.IsArr() {
				tc.Arr = append(tc.Arr, call)
				return nil
			}
		}
		return Obj(M("role", Str("assistant")), M("tool_calls", Arr(call)))
	case "reasoning":
		text := ""
		if c := v.Get("content"); c.IsArr() && len(c.Arr) > 0 {
			text = c.Arr[0].Get("text").StrOr("")
		} else if s := v.Get("summary"); s.IsArr() && len(s.Arr) > 0 {
			text = s.Arr[0].Get("text").StrOr("")
		}
		if pa != nil && pa.Get("reasoning").IsNull() {
			pa.Set("reasoning", Str(text))
			return nil
		}
		return Obj(M("role", Str("assistant")), M("reasoning", Str(text)))
	case "output_message", "assistant":
		text := ""
		c := v.Get("content")
		switch {
		case c.IsStr():
			text = c.Str
		case c.IsArr() && len(c.Arr) > 0:
			if first := c.Arr[0]; first.IsObj() {
				text = first.Get("text").StrOr("")
			} else {
				text = first.StrOr("")
			}
		}
		if pa != nil && pa.Get("content").IsNull() {
			pa.Set("content", Str(text))
			return nil
		}
		return Obj(M("role", Str("assistant")), M("content", Str(text)))
	case "function_call_output":
		return Obj(M("role", Str("tool")), M("content", orNull(v.Get("output"))), M("tool_call_id", Str(v.Get("call_id").Str)))
	}
	return v
}

// runStarts returns the index of the item that starts each chat message messageFromItem makes
// of items (the others merge into the assistant message before them), without building the
// messages: the cached path looks each run of items up by its keys and builds a message only on
// a miss. It follows messageFromItem's merge rules on the three facts they read of the last
// message: that it is an assistant message, and whether its reasoning and its content are null
// (its tool_calls are null or a list whenever it is an assistant message made here, so a
// function_call always merges into one). An item of kind "message" is never an assistant
// message (normalizeItems gives those kind "assistant"), and an item of kind "other" never
// reaches here (responsesItem). Keep it in step with messageFromItem.
func runStarts(items []item, starts []int) []int {
	var asst, reasoned, said bool // the last message: assistant, reasoning set, content set
	for i, it := range items {
		switch it.kind {
		case "function_call":
			if asst {
				continue
			}
			asst, reasoned, said = true, false, false
		case "reasoning":
			if asst && !reasoned {
				reasoned = true
				continue
			}
			asst, reasoned, said = true, true, false
		case "output_message", "assistant":
			if asst && !said {
				said = true
				continue
			}
			asst, reasoned, said = true, false, true
		default: // "function_call_output" (role tool), "message" (user, system, developer)
			asst = false
		}
		starts = append(starts, i)
	}
	return starts
}

// continueFinal is should_continue_final_message: the last item is an assistant output message
// or a reasoning item (or a dict message that kept its status) whose status is in_progress or
// incomplete.
func continueFinal(items []item) bool {
	if len(items) == 0 {
		return false
	}
	last := items[len(items)-1]
	switch last.kind {
	case "output_message", "reasoning", "message":
		s := last.v.Get("status").StrOr("")
		return s == "in_progress" || s == "incomplete"
	}
	return false
}
