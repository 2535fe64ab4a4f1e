package chat

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kvroute/kvroute/internal/jinja"
)

// conversation converts the request's messages into the list handed to the template, the way
// vLLM does (vllm/entrypoints/chat_utils.py @001eadcf; table in testdata/golden/README.md):
//
//   - content: a string s becomes [{"type":"text","text":s}], null becomes [], text, input_text,
//     output_text and refusal parts become {"type":"text","text":…}, image_url → {"type":"image"},
//     video_url → {"type":"video"}, audio parts → {"type":"audio"};
//   - for a template that does not loop over message content ("string" content format) the text
//     parts are joined with "\n" into one string (media parts are then an error);
//   - a tool message whose parts are all text gets the "\n"-joined string;
//   - assistant tool_calls are copied with function.arguments decoded by json.loads semantics
//     (empty, null or invalid → {}); an empty tool_calls list is dropped;
//   - an assistant's reasoning is passed as both reasoning and reasoning_content; tool_call_id
//     (tool), a string name, a string task and a developer message's tools are kept.
//
// A role other than system, developer, user, assistant, tool, function or ipython is an error
// (vLLM itself would hand any role string to the template).
//
// Member order of each message is role, content, then the extras in that order (vLLM builds
// the message in the same order).
func (t *Template) conversation(req *Request, c *converter) (jinja.Value, error) {
	if req.messages == nil {
		return jinja.Undefined(), errors.New("request has no messages")
	}
	out := make([]jinja.Value, 0, len(req.messages.items))
	for i, m := range req.messages.items {
		v, err := t.cachedMessage(req, m, c)
		if err != nil {
			return jinja.Undefined(), fmt.Errorf("converting messages[%d]: %w", i, err)
		}
		out = append(out, v)
	}
	return jinja.NewList(out), nil
}

func (t *Template) message(m *node, c *converter) (jinja.Value, error) {
	if m.kind != kindObject {
		return jinja.Undefined(), fmt.Errorf("message is %s, not an object", m.kind)
	}
	rn := m.get("role")
	if rn == nil || rn.kind != kindString {
		return jinja.Undefined(), errors.New("role missing or not a string")
	}
	role := rn.str
	switch role {
	case "system", "developer", "user", "assistant", "tool", "function", "ipython":
	default:
		return jinja.Undefined(), fmt.Errorf("unknown role %q", role)
	}
	var parts []jinja.Value
	var texts []string
	allText := true
	cn := m.get("content")
	switch {
	case cn.isNull():
	case cn.kind == kindString:
		parts = append(parts, textPart(c, cn.str, false))
		texts = append(texts, cn.str)
	case cn.kind == kindArray:
		for pi, p := range cn.items {
			pp, err := resolvePart(p)
			if err != nil {
				return jinja.Undefined(), fmt.Errorf("content[%d]: %w", pi, err)
			}
			switch pp.kind {
			case partSkip:
			case partText:
				parts = append(parts, textPart(c, pp.text, pp.textNull))
				texts = append(texts, pp.text)
			case partToolReference:
				v := jinja.NewDict()
				v.AsDict().Set("type", jinja.NewString("tool_reference"))
				v.AsDict().Set("name", nullableStr(c, pp.text, pp.textNull))
				parts, allText = append(parts, v), false
			case partImage:
				parts, allText = append(parts, typePart("image")), false
			case partVideo:
				parts, allText = append(parts, typePart("video")), false
			case partAudio:
				parts, allText = append(parts, typePart("audio")), false
			}
		}
	default:
		return jinja.Undefined(), fmt.Errorf("content is %s, not a string, array or null", cn.kind)
	}

	c.vals += 2 * len(parts) // each part: a dict and its values
	msg := jinja.NewDict()
	d := msg.AsDict()
	d.Set("role", c.str(role))
	switch {
	case t.stringContent:
		if !allText {
			return jinja.Undefined(), errors.New("media part in a message for a template that takes string content")
		}
		d.Set("content", c.str(strings.Join(texts, "\n")))
	case role == "tool" && allText:
		d.Set("content", c.str(strings.Join(texts, "\n")))
	default:
		if parts == nil {
			parts = []jinja.Value{}
		}
		d.Set("content", jinja.NewList(parts))
	}

	switch role {
	case "assistant":
		if tc := m.get("tool_calls"); !tc.isNull() {
			v, err := toolCalls(tc, c)
			if err != nil {
				return jinja.Undefined(), err
			}
			if !(v.IsList() && v.AsList().Len() == 0) {
				d.Set("tool_calls", v)
			}
		}
		if rs := m.get("reasoning"); !rs.isNull() {
			d.Set("reasoning", c.value(rs))
			d.Set("reasoning_content", c.value(rs))
		}
	case "tool":
		if id := m.get("tool_call_id"); id != nil {
			d.Set("tool_call_id", c.value(id))
		}
	}
	if name := m.get("name"); name != nil && name.kind == kindString {
		d.Set("name", c.str(name.str))
	}
	if task := m.get("task"); task != nil && task.kind == kindString {
		d.Set("task", c.str(task.str))
	}
	if role == "developer" {
		tools := jinja.None()
		if tn := m.get("tools"); tn != nil {
			tools = c.value(tn)
		}
		d.Set("tools", tools)
	}
	return msg, nil
}

func textPart(c *converter, s string, null bool) jinja.Value {
	v := jinja.NewDict()
	v.AsDict().Set("type", jinja.NewString("text"))
	v.AsDict().Set("text", nullableStr(c, s, null))
	return v
}

func nullableStr(c *converter, s string, null bool) jinja.Value {
	if null {
		return jinja.None()
	}
	return c.str(s)
}

func typePart(t string) jinja.Value {
	v := jinja.NewDict()
	v.AsDict().Set("type", jinja.NewString(t))
	return v
}

// toolCalls copies an assistant's tool_calls, decoding each function.arguments string the way
// vLLM's _postprocess_messages does with json.loads (empty, null or invalid → {}).
func toolCalls(tc *node, c *converter) (jinja.Value, error) {
	if tc.kind != kindArray {
		return c.value(tc), nil
	}
	items := make([]jinja.Value, 0, len(tc.items))
	for i, call := range tc.items {
		if call.kind != kindObject {
			return jinja.Undefined(), fmt.Errorf("tool_calls[%d] is %s, not an object", i, call.kind)
		}
		fn := call.get("function")
		if fn == nil || fn.kind != kindObject {
			return jinja.Undefined(), fmt.Errorf("tool_calls[%d].function missing or not an object", i)
		}
		cv := jinja.NewDict()
		cd := cv.AsDict()
		for k, key := range call.keys {
			if key != "function" {
				cd.Set(key, c.value(call.vals[k]))
				continue
			}
			fv := jinja.NewDict()
			fd := fv.AsDict()
			for j, fk := range fn.keys {
				if fk == "arguments" {
					fd.Set(fk, jinja.None()) // placeholder keeps the first position
					continue
				}
				fd.Set(fk, c.value(fn.vals[j]))
			}
			fd.Set("arguments", arguments(fn.get("arguments"), c))
			cd.Set("function", fv)
		}
		items = append(items, cv)
	}
	return jinja.NewList(items), nil
}

// arguments decodes one function.arguments value.
func arguments(a *node, c *converter) jinja.Value {
	empty := jinja.NewDict()
	switch {
	case a.isNull():
		return empty
	case a.kind == kindString:
		if a.str == "" {
			return empty
		}
		n, err := parseJSON([]byte(a.str), true)
		if err != nil {
			return empty
		}
		return c.value(n)
	case a.kind == kindObject || a.kind == kindArray:
		return c.value(a)
	}
	// Other scalars: false/0 are falsy (→ {}), and json.loads rejects the rest (→ {}).
	return empty
}

// checkTool validates one request tool like vLLM's ChatCompletionToolsParam: an object with an
// optional "type" equal to "function" and a "function" object with a string name, an optional
// string description and an optional object parameters.
func checkTool(t *node) error {
	if t.kind != kindObject {
		return fmt.Errorf("tool is %s, not an object", t.kind)
	}
	if ty := t.get("type"); ty != nil && (ty.kind != kindString || ty.str != "function") {
		return errors.New(`tool type is not "function"`)
	}
	fn := t.get("function")
	if fn == nil || fn.kind != kindObject {
		return errors.New("tool function missing or not an object")
	}
	if name := fn.get("name"); name == nil || name.kind != kindString {
		return errors.New("tool function name missing or not a string")
	}
	if d := fn.get("description"); !d.isNull() && d.kind != kindString {
		return fmt.Errorf("tool function description is %s, not a string", d.kind)
	}
	if p := fn.get("parameters"); !p.isNull() && p.kind != kindObject {
		return fmt.Errorf("tool function parameters is %s, not an object", p.kind)
	}
	return nil
}

// toolValue is vLLM's tool.model_dump() of a checked tool (pydantic v2, extra="allow"):
// {"type": "function", "function": {"name", "description", "parameters", extra members…},
// extra members…}, declared fields first and null when absent, extras in request order.
func toolValue(t *node, c *converter) jinja.Value {
	fn := t.get("function")
	fv := jinja.NewDict()
	fd := fv.AsDict()
	for _, k := range []string{"name", "description", "parameters"} {
		if v := fn.get(k); v != nil {
			fd.Set(k, c.value(v))
		} else {
			fd.Set(k, jinja.None())
		}
	}
	for i, k := range fn.keys {
		if k != "name" && k != "description" && k != "parameters" {
			fd.Set(k, c.value(fn.vals[i]))
		}
	}
	tv := jinja.NewDict()
	td := tv.AsDict()
	td.Set("type", jinja.NewString("function"))
	td.Set("function", fv)
	for i, k := range t.keys {
		if k != "type" && k != "function" {
			td.Set(k, c.value(t.vals[i]))
		}
	}
	return tv
}
