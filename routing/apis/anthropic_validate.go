package apis

import (
	"math/big"
	"strings"
)

// validateAnthropic applies the checks of vLLM's AnthropicMessagesRequest model
// (vllm/entrypoints/anthropic/protocol.py at the commit named in doc.go) that decide whether the
// worker accepts the request: what it refuses is routed on load alone and answered by the worker.
// validateAnthropicMessage checks one element of `messages`.
func validateAnthropicMessage(m *Value) error {
	switch role(m) {
	case "user", "assistant", "system":
	default:
		return invalid("message.role must be user|assistant|system")
	}
	c := m.Get("content")
	if c.IsStr() {
		return nil
	}
	if !c.IsArr() {
		return invalid("message.content must be a string or a list of blocks")
	}
	return validateBlocks(c.Arr)
}

func validateAnthropic(req *Value) error {
	if !req.IsObj() {
		return invalid("the body is not an object")
	}
	if m := req.Get("model"); !m.IsStr() || m.Str == "" {
		return invalid("Model is required")
	}
	mt := req.Get("max_tokens")
	maxTokens, ok := intValue(mt)
	if !ok {
		return invalid("max_tokens: an integer is required")
	}
	if maxTokens.Sign() <= 0 {
		return invalid("max_tokens must be positive")
	}
	msgs := req.Get("messages")
	if !msgs.IsArr() {
		return invalid("messages: a list is required")
	}
	for _, m := range msgs.Arr {
		if err := validateAnthropicMessage(m); err != nil {
			return err
		}
	}
	if s := req.Get("system"); !s.IsNull() {
		if s.IsArr() {
			if err := validateBlocks(s.Arr); err != nil {
				return err
			}
		} else if !s.IsStr() {
			return invalid("system must be a string or a list of blocks")
		}
	}
	if tc := req.Get("tool_choice"); !tc.IsNull() {
		switch tc.Get("type").StrOr("") {
		case "auto", "any", "none":
		case "tool":
			if !tc.Get("name").Truthy() {
				return invalid("tool_choice.name is required when type is 'tool'")
			}
		default:
			return invalid("tool_choice.type must be auto|any|tool|none")
		}
	}
	if ts := req.Get("tools"); !ts.IsNull() {
		if !ts.IsArr() {
			return invalid("tools must be a list")
		}
		for _, t := range ts.Arr {
			if !t.Get("name").IsStr() {
				return invalid("tool.name is required")
			}
			if !t.Get("input_schema").IsObj() {
				return invalid("input_schema must be a dictionary")
			}
		}
	}
	if oc := req.Get("output_config"); !oc.IsNull() {
		if e := oc.Get("effort"); !e.IsNull() {
			switch e.StrOr("") {
			case "low", "medium", "high", "xhigh", "max":
			default:
				return invalid("output_config.effort invalid")
			}
		}
	}
	if th := req.Get("thinking"); !th.IsNull() {
		switch th.Get("type").StrOr("") {
		case "disabled", "adaptive":
		case "enabled":
			b, ok := intValue(th.Get("budget_tokens"))
			if !ok || b.Cmp(big.NewInt(1024)) < 0 {
				return invalid("thinking.budget_tokens must be an integer >= 1024")
			}
			if b.Cmp(maxTokens) >= 0 {
				return invalid("thinking.budget_tokens must be less than max_tokens")
			}
		default:
			return invalid("thinking.type must be enabled|disabled|adaptive")
		}
	}
	if cs := req.Get("cache_salt"); !cs.IsNull() && (!cs.IsStr() || cs.Str == "" || len([]rune(cs.Str)) > 1024) {
		return invalid("cache_salt: a string of 1 to 1024 characters is required")
	}
	if kw := req.Get("chat_template_kwargs"); !kw.IsNull() && !kw.IsObj() {
		return invalid("chat_template_kwargs must be an object")
	}
	return nil
}

var blockTypes = []string{"text", "image", "tool_use", "tool_result", "tool_reference", "thinking", "redacted_thinking"}

func validateBlocks(bs []*Value) error {
	for _, b := range bs {
		if !b.IsObj() {
			return invalid("a content block must be an object")
		}
		t := b.Get("type").StrOr("")
		known := false
		for _, k := range blockTypes {
			known = known || t == k
		}
		if !known {
			return invalid("content block type '%s' is not one of ('%s')", t, strings.Join(blockTypes, "', '"))
		}
		for _, k := range []string{"text", "id", "tool_use_id", "name", "tool_name", "thinking", "signature", "data"} {
			if v := b.Get(k); !v.IsNull() && !v.IsStr() {
				return invalid("content block %s must be a string", k)
			}
		}
		if v := b.Get("source"); !v.IsNull() && !v.IsObj() {
			return invalid("content block source must be an object")
		}
		if v := b.Get("input"); !v.IsNull() && !v.IsObj() {
			return invalid("content block input must be an object")
		}
		if v := b.Get("content"); !v.IsNull() && !v.IsStr() {
			if !v.IsArr() {
				return invalid("content block content must be a string or a list")
			}
			for _, it := range v.Arr {
				if !it.IsObj() {
					return invalid("content block content items must be objects")
				}
			}
		}
	}
	return nil
}

// intValue reads a JSON integer (pydantic's int also takes a float with no fraction).
func intValue(v *Value) (*big.Int, bool) {
	if v == nil || v.Kind != KindNumber {
		return nil, false
	}
	var n big.Int
	if _, ok := n.SetString(v.Str, 10); ok {
		return &n, true
	}
	f, ok := new(big.Float).SetString(v.Str)
	if !ok || !f.IsInt() {
		return nil, false
	}
	i, _ := f.Int(nil)
	return i, true
}
