package chat_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/routing/chat"
)

// partsBody is a request with messages user messages, each with parts text parts, and extra
// (raw JSON members) appended at the top level.
func partsBody(messages, parts int, extra string) []byte {
	var b strings.Builder
	b.WriteString(`{"model":"m","messages":[`)
	for i := range messages {
		if i > 0 {
			b.WriteByte(',')
		}
		if parts == 0 {
			b.WriteString(`{"role":"user","content":"x"}`)
			continue
		}
		b.WriteString(`{"role":"user","content":[`)
		for j := range parts {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`{"type":"text","text":"x"}`)
		}
		b.WriteString(`]}`)
	}
	b.WriteString(`]` + extra + `}`)
	return []byte(b.String())
}

func TestParseRequestLimited(t *testing.T) {
	lim := chat.Limits{MaxMessages: 8, MaxParts: 12}
	for _, c := range []struct {
		name string
		body []byte
		want string // "" ok, else the error text wanted (ErrTooManyParts)
	}{
		{"messages at the limit", partsBody(8, 0, ""), ""},
		{"one message over", partsBody(9, 0, ""), "more than 8 messages"},
		{"parts at the limit", partsBody(3, 4, ""), ""},
		{"parts over across messages", partsBody(4, 4, ""), "more than 12 content parts"},
		// 16 values per allowed message and part: 320; a tools array of 400 numbers is over.
		{"values over", partsBody(1, 0, `,"tools":[`+strings.Repeat("0,", 399)+`0]`), "more than 320 JSON values"},
		// a member the router never reads is checked but neither built nor counted
		{"unread member skipped", partsBody(1, 0, `,"logit_bias":[`+strings.Repeat("0,", 9999)+`0]`), ""},
	} {
		r, err := chat.ParseRequestLimited(c.body, lim)
		if c.want == "" {
			if err != nil || r.SchemaErr != nil {
				t.Errorf("%s: err %v, schema %v", c.name, err, r.SchemaErr)
			}
			continue
		}
		if !errors.Is(err, chat.ErrTooManyParts) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want ErrTooManyParts %q", c.name, err, c.want)
		}
	}
	// Skipped members are held to the same JSON syntax as built ones.
	for _, bad := range []string{`"x":[1,]`, `"x":"\q"`, `"x":"\u12g4"`, `"x":{"a" 1}`, `"x":01`, "\"x\":\"a\tb\"", `"x":tru`} {
		body := []byte(`{"messages":[],` + bad + `}`)
		_, err := chat.ParseRequestLimited(body, lim)
		_, want := chat.ParseRequest(body)
		if err == nil || want == nil {
			t.Errorf("%s: limited err %v, unlimited err %v; both must refuse", bad, err, want)
		}
	}
	if _, err := chat.ParseRequestLimited([]byte(`{"messages":[],"x":{"a":[true,false,null,-1.5e3,"\u00e9\n"]}}`), lim); err != nil {
		t.Errorf("valid skipped member: %v", err)
	}
}

// TestParseRequestLimitedStopsEarly: a body of 10^5 parts is refused after decoding the parts up
// to the limit: the bytes allocated do not grow with the body (ratio of two sizes).
func TestParseRequestLimitedStopsEarly(t *testing.T) {
	lim := chat.Limits{MaxMessages: chat.DefaultMaxMessages, MaxParts: chat.DefaultMaxParts}
	alloc := func(n int) float64 {
		body := partsBody(1, n, "")
		return testing.AllocsPerRun(1, func() {
			if _, err := chat.ParseRequestLimited(body, lim); !errors.Is(err, chat.ErrTooManyParts) {
				panic(fmt.Sprint("want ErrTooManyParts, got ", err))
			}
		})
	}
	small, large := alloc(20_000), alloc(200_000)
	t.Logf("allocations refusing 2·10^4 parts: %.0f, 2·10^5 parts: %.0f", small, large)
	if large > small*1.01 {
		t.Fatalf("refusing 10× more parts made %.0f allocations instead of %.0f: the parse does not stop at the limit", large, small)
	}
}
