package apis

import (
	"bytes"
	"sync"

	"github.com/zeebo/xxh3"
)

// The converter's two paths per API (convert.go): the cached one here, and the full one
// (FromResponses, FromAnthropic and Body) for everything it does not take.

// ResponsesChat is FromResponses followed by Form.Body: the chat body vLLM renders for a
// Responses request, with the request's previous_response_id and store. On the cached path the
// returned Responses has no Form. A request vLLM refuses gives FromResponses' error and result.
func (c *Converter) ResponsesChat(body []byte, opt ResponsesOptions) (*Responses, []byte, error) {
	if c != nil && c.lru != nil {
		if out, chat, ok := c.responsesCached(body, opt); ok {
			return out, chat, nil
		}
	}
	rr, err := FromResponses(body, opt)
	if err != nil {
		return rr, nil, err
	}
	return rr, rr.Form.Body(), nil
}

// AnthropicChat is FromAnthropic followed by Body.
func (c *Converter) AnthropicChat(body []byte, opt AnthropicOptions) ([]byte, error) {
	if c != nil && c.lru != nil {
		if chat, ok := c.anthropicCached(body, opt); ok {
			return chat, nil
		}
	}
	f, err := FromAnthropic(body, opt)
	if err != nil {
		return nil, err
	}
	return f.Body(), nil
}

// responsesItem returns the item the full path makes of raw (the cache's, or decoded, checked
// and stored); ok is false for an item the cached path does not take: one vLLM refuses, or of a
// type the conversion passes through as it is (kind "other": merging a later item into it would
// change the shared value).
func (c *Converter) responsesItem(raw []byte, key xxh3.Uint128) (*item, bool) {
	if d := c.get(key, len(raw)); d != nil && d.item != nil {
		return d.item, true
	}
	v, err := parseItem(raw)
	if err != nil {
		return nil, false
	}
	its, err := normalizeItems([]*Value{v})
	if err != nil || its[0].kind == "other" {
		return nil, false
	}
	// charged for the decoded strings (at most the text) and the nodes, about the text again
	c.put(key, len(raw), &convData{item: &its[0]}, 2*len(raw))
	return &its[0], true
}

func (c *Converter) responsesCached(body []byte, opt ResponsesOptions) (*Responses, []byte, bool) {
	top, ok := scanTop(body, "input")
	if !ok || !top.list {
		return nil, nil, false
	}
	out, f, err := responsesForm(top.req, len(body), opt)
	if err != nil {
		return nil, nil, false
	}
	keys := make([]xxh3.Uint128, len(top.items))
	items := make([]item, len(top.items))
	for i, raw := range top.items {
		keys[i] = xxh3.Hash128(raw)
		it, ok := c.responsesItem(raw, keys[i])
		if !ok {
			return nil, nil, false
		}
		items[i] = *it
	}
	// Each chat message's encoding is cached under the run of items that made it (runStarts
	// finds the runs); a message is built (messageFromItem over its run) only on a miss.
	first := runStarts(items, make([]int, 0, len(items)))
	if continueFinal(items) {
		f.ContinueFinalMessage, f.AddGenerationPrompt = true, false
	}
	enc := make([][]byte, 0, len(f.Messages)+len(first))
	for _, m := range f.Messages {
		enc = append(enc, encode(m))
	}
	var rk runKey
	for j, start := range first {
		end := len(items)
		if j+1 < len(first) {
			end = first[j+1]
		}
		rk.reset()
		for i := start; i < end; i++ {
			rk.add(keys[i], len(top.items[i]))
		}
		key := rk.sum()
		if d := c.get(key, rk.n); d != nil && d.item == nil {
			enc = append(enc, d.out)
			continue
		}
		// the run's first item starts a message whatever came before (runStarts); the others
		// merge into it, or runStarts and messageFromItem disagree and the full path decides
		m := messageFromItem(items[start], nil)
		for i := start + 1; i < end; i++ {
			if messageFromItem(items[i], []*Value{m}) != nil {
				return nil, nil, false
			}
		}
		e := encode(m)
		c.put(key, rk.n, &convData{out: e}, len(e))
		enc = append(enc, e)
	}
	return out, chatBody(f, enc), true
}

func (c *Converter) anthropicCached(body []byte, opt AnthropicOptions) ([]byte, bool) {
	top, ok := scanTop(body, "messages")
	if !ok || !top.list || validateAnthropic(top.req) != nil {
		return nil, false
	}
	f := anthropicForm(top.req, len(body), opt)
	enc := make([][]byte, 0, len(top.items)+1)
	if sys := systemPromptText(top.req); sys != "" {
		enc = append(enc, encode(Obj(M("role", Str("system")), M("content", Str(sys)))))
	}
	for _, raw := range top.items {
		key := xxh3.Hash128Seed(raw, anthropicSeed)
		d := c.get(key, len(raw))
		if d == nil || d.item != nil {
			if d, ok = c.anthropicMessage(raw); !ok {
				return nil, false
			}
			c.put(key, len(raw), d, len(d.out)) // only the encoded chat messages are kept
		}
		if len(d.out) > 0 {
			enc = append(enc, d.out)
		}
	}
	return chatBody(f, enc), true
}

// anthropicMessage converts one element of `messages` the way FromAnthropic does when no
// element is a system message; ok is false for a system message (normalizeInlineSystem places
// those by looking at the whole list), a message vLLM refuses, and a tool_use without an id
// (vLLM gives it a clock-based id: not the same on every turn).
func (c *Converter) anthropicMessage(raw []byte) (*convData, bool) {
	m, err := parseItem(raw)
	if err != nil || validateAnthropicMessage(m) != nil || role(m) == "system" {
		return nil, false
	}
	if cs := m.Get("content"); cs.IsArr() {
		for _, b := range cs.Arr {
			if b.Get("type").Str == "tool_use" && b.Get("id").StrOr("") == "" {
				return nil, false
			}
		}
	}
	var out bytes.Buffer
	for i, cm := range convertAnthropicMessage(m, nil) {
		if i > 0 {
			out.WriteByte(',')
		}
		cm.write(&out)
	}
	return &convData{out: out.Bytes()}, true
}

// anthropicSeed keeps the keys of Anthropic messages apart from those of Responses items: the
// same JSON text can be both and converts differently.
const anthropicSeed = 0x616e7468726f7069

// chatBody is f's Body with the messages given encoded, in a buffer from chatBodies.
func chatBody(f *ChatForm, enc [][]byte) []byte {
	buf := bytes.NewBuffer(getChatBody(f.sizeHint + 4096))
	f.writeBody(buf, func(b *bytes.Buffer) { writeList(b, enc) })
	return buf.Bytes()
}

// maxPooledChatBody bounds the buffers ReleaseChatBody keeps (the handler's body pool bound).
const maxPooledChatBody = 8 << 20

// chatBodies recycles chat bodies: a 700 kB buffer allocated per request costs more in zeroed
// fresh pages (page faults, the runtime returning memory) than writing it, as the request
// bodies did before caddymodule pooled them (docs/benchmarks.md, session 24).
var chatBodies sync.Pool // *[]byte

func getChatBody(n int) []byte {
	if p, ok := chatBodies.Get().(*[]byte); ok && cap(*p) >= n {
		return (*p)[:0]
	}
	return make([]byte, 0, n+n/4)
}

// ReleaseChatBody gives back a chat body that ResponsesChat or AnthropicChat returned, once
// nothing uses it any more (the router: when Route returns; the parsed chat request aliases it).
func ReleaseChatBody(b []byte) {
	if cap(b) == 0 || cap(b) > maxPooledChatBody {
		return
	}
	b = b[:0]
	chatBodies.Put(&b)
}
