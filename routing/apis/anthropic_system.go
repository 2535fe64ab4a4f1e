package apis

import "strings"

// Placement of system text in the Messages API: vllm/entrypoints/anthropic/inline_system.py
// (normalize_inline_system and helpers) at the commit named in doc.go. Inline system messages
// are kept in place ("preserve") or folded into a neighbouring message ("fold"); both only
// change the end of a conversation, so each turn's prompt extends the previous one.

// billingHeader starts Claude Code's per-request attribution text, which vLLM drops from system
// blocks (it would change the head of every prompt).
const billingHeader = "x-anthropic-billing-header"

func joinNonEmpty(texts ...string) string {
	var b strings.Builder
	for _, t := range texts {
		if t == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(t)
	}
	return b.String()
}

// blocksText joins the text blocks with "", without empty ones and billing headers.
func blocksText(blocks []*Value) string {
	var b strings.Builder
	for _, bl := range blocks {
		t := bl.Get("text").StrOr("")
		if bl.Get("type").StrOr("") == "text" && t != "" && !strings.HasPrefix(t, billingHeader) {
			b.WriteString(t)
		}
	}
	return b.String()
}

// systemText is the text of a system message without the billing header.
func systemText(m *Value) string {
	c := m.Get("content")
	if c.IsStr() {
		if strings.HasPrefix(c.Str, billingHeader) {
			return ""
		}
		return c.Str
	}
	return blocksText(c.Arr)
}

// systemPromptText is the top-level system field's text (a string is kept as is, even with the
// billing header).
func systemPromptText(req *Value) string {
	s := req.Get("system")
	if s.IsStr() {
		return s.Str
	}
	if s.IsArr() {
		return blocksText(s.Arr)
	}
	return ""
}

func role(m *Value) string { return m.Get("role").StrOr("") }

func hasBlock(m *Value, typ string) bool {
	c := m.Get("content")
	if !c.IsArr() {
		return false
	}
	for _, b := range c.Arr {
		if b.Get("type").StrOr("") == typ {
			return true
		}
	}
	return false
}

// moveOutOfToolRuns moves system messages that sit between an assistant's tool_use and the
// answering user message to after that user message.
func moveOutOfToolRuns(msgs []*Value) []*Value {
	var out, held []*Value
	awaiting := false
	for _, m := range msgs {
		r := role(m)
		if r == "system" {
			if awaiting {
				held = append(held, m)
			} else {
				out = append(out, m)
			}
			continue
		}
		if r == "assistant" {
			out = append(out, held...)
			held = held[:0]
		}
		out = append(out, m)
		if r == "user" {
			out = append(out, held...)
			held = held[:0]
		}
		awaiting = r == "assistant" && hasBlock(m, "tool_use")
	}
	return append(out, held...)
}

// normalizeInlineSystem returns the text of the system messages leading `messages` (appended to
// the system prompt) and the other messages placed per mode.
func normalizeInlineSystem(req *Value, msgs []*Value, mode string) (string, []*Value) {
	any := false
	for _, m := range msgs {
		if role(m) == "system" {
			any = true
			break
		}
	}
	if !any {
		return "", msgs
	}
	n := 0
	for n < len(msgs) && role(msgs[n]) == "system" {
		n++
	}
	var lead []string
	for _, m := range msgs[:n] {
		lead = append(lead, systemText(m))
	}
	leading := joinNonEmpty(lead...)
	rest := moveOutOfToolRuns(msgs[n:])
	if mode == "preserve" && (systemPromptText(req) != "" || leading != "") {
		return leading, rest
	}
	var out []*Value
	var pending []string
	for _, m := range rest {
		if role(m) == "system" {
			t := systemText(m)
			if t == "" {
				continue
			}
			if len(out) > 0 && role(out[len(out)-1]) == "user" && len(pending) == 0 {
				out[len(out)-1] = appendToUser(out[len(out)-1], t)
			} else {
				pending = append(pending, t)
			}
			continue
		}
		if len(pending) > 0 {
			t := joinNonEmpty(pending...)
			pending = nil
			if role(m) == "user" {
				m = withContent(m, addText(m.Get("content"), t, false))
			} else {
				out = append(out, Obj(M("role", Str("user")), M("content", Str(t))))
			}
		}
		out = append(out, m)
	}
	if len(pending) > 0 {
		out = append(out, Obj(M("role", Str("user")), M("content", Str(joinNonEmpty(pending...)))))
	}
	return leading, out
}

func withContent(m *Value, c *Value) *Value {
	n := m.Clone()
	n.Set("content", c)
	return n
}

// addText joins text onto the text at one end of content (a string, null or a block list),
// merging into an adjacent text block rather than adding one.
func addText(content *Value, text string, atEnd bool) *Value {
	if content.IsNull() || content.IsStr() {
		old := content.StrOr("")
		if atEnd {
			return Str(joinNonEmpty(old, text))
		}
		return Str(joinNonEmpty(text, old))
	}
	items := append([]*Value{}, content.Arr...)
	end := 0
	if atEnd {
		end = len(items) - 1
	}
	if len(items) > 0 && items[end].Get("type").StrOr("") == "text" {
		old := items[end].Get("text").StrOr("")
		nw := joinNonEmpty(text, old)
		if atEnd {
			nw = joinNonEmpty(old, text)
		}
		it := items[end].Clone()
		it.Set("text", Str(nw))
		items[end] = it
	} else if atEnd {
		items = append(items, textPart(text))
	} else {
		items = append([]*Value{textPart(text)}, items...)
	}
	return Arr(items...)
}

// appendToUser appends text to the user's own text, or, when the message is only tool_results,
// to the last tool result (blocks other than tool_result become the user message that follows
// the tool messages, so appending there never adds a turn).
func appendToUser(m *Value, text string) *Value {
	c := m.Get("content")
	if c.IsArr() && len(c.Arr) > 0 {
		all := true
		for _, b := range c.Arr {
			if b.Get("type").StrOr("") != "tool_result" {
				all = false
				break
			}
		}
		if all {
			last := c.Arr[len(c.Arr)-1].Clone()
			last.Set("content", addText(last.Get("content"), text, true))
			blocks := append(append([]*Value{}, c.Arr[:len(c.Arr)-1]...), last)
			return withContent(m, Arr(blocks...))
		}
	}
	if c.IsStr() {
		return withContent(m, addText(c, text, true))
	}
	var own, results []*Value
	for _, b := range c.Arr {
		if b.Get("type").StrOr("") == "tool_result" {
			results = append(results, b)
		} else {
			own = append(own, b)
		}
	}
	joined := addText(Arr(own...), text, true)
	return withContent(m, Arr(append(results, joined.Arr...)...))
}
