package main

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// words is the vocabulary of the generated documents: common English words, most of them one
// Qwen token with their leading space, so a document's token count follows its word count.
var words = strings.Fields(`the of and to in is was for that with as on by at from his her their this which
have had are were be been has not but they all one two three new first after time years also other
more some many most such only over into than when would there can may about them made city world
state system water house people part work place group number school family river area report
government company market history language music power field order model data network memory
cache block token worker request route server client engine layer value point table query result
paper study method test case change level rate price energy light space image video frame clip
note page line word text book story game team player season league match club album song film`)

// docGen writes documents of pseudo-random words; a different seed gives a different document,
// so every request of a cold workload is new to kvroute.
type docGen struct {
	tokensPerWord float64 // measured once with the model's tokenizer
}

// doc returns a document of about tokens tokens.
func (g *docGen) doc(seed uint64, tokens int) string {
	n := int(float64(tokens) / g.tokensPerWord)
	r := rand.New(rand.NewPCG(seed, 0x6b76726f757465))
	var b strings.Builder
	b.Grow(n * 7)
	for i := 0; i < n; i++ {
		if i > 0 {
			if i%17 == 0 {
				b.WriteString(".\n")
			} else {
				b.WriteByte(' ')
			}
		}
		b.WriteString(words[r.IntN(len(words))])
	}
	return b.String()
}

type message struct {
	Role    string `json:"role"`
	Content any    `json:"content"`
}

func chatBody(msgs []message) []byte {
	b, err := json.Marshal(map[string]any{"model": "m", "max_tokens": 1, "messages": msgs})
	if err != nil {
		panic(err)
	}
	return b
}

// workload builds the request bodies of one run: bodies[g][i] is the i-th request of client g.
// Both sites receive the same bodies.
type workload struct {
	name  string
	path  string // the request path; "" is /v1/chat/completions
	about string
	build func(g *docGen, clients, perClient int, mediaURL string) [][][]byte
}

var systemPrompt string // about 1k tokens, shared by every chat request (set in main)

var workloads = []workload{
	{
		name:  "chat4k",
		about: "4k-token chat: the shared 1k-token system prompt and a new 3k-token user message per request",
		build: func(g *docGen, clients, per int, _ string) [][][]byte {
			return perRequest(clients, per, func(seed uint64) []byte {
				return chatBody([]message{{"system", systemPrompt}, {"user", g.doc(seed, 3000)}})
			})
		},
	},
	{
		name:  "cold111k",
		about: "111k-token chat, all cold: a new 110k-token document per request after the system prompt",
		build: func(g *docGen, clients, per int, _ string) [][][]byte {
			return perRequest(clients, per, func(seed uint64) []byte {
				return chatBody([]message{{"system", systemPrompt}, {"user", "Summarize this document.\n\n" + g.doc(1<<32+seed, 110000)}})
			})
		},
	},
	{
		name:  "multiturn100k",
		about: "100k-token multi-turn conversation (49 turns of ~2k tokens) growing by one ~2k-token turn per request, one conversation per client",
		build: func(g *docGen, clients, per int, _ string) [][][]byte {
			out := make([][][]byte, clients)
			for c := range out {
				msgs := []message{{"system", systemPrompt}}
				seed := uint64(2<<32) + uint64(c)<<20
				turn := func() {
					seed++
					msgs = append(msgs, message{"user", g.doc(seed, 1500)})
					seed++
					msgs = append(msgs, message{"assistant", g.doc(seed, 500)})
				}
				for len(msgs) < 1+2*49 {
					turn()
				}
				for i := 0; i < per; i++ {
					seed++
					user := message{"user", g.doc(seed, 1500)}
					msgs = append(msgs, user)
					out[c] = append(out[c], chatBody(msgs))
					seed++
					msgs = append(msgs, message{"assistant", g.doc(seed, 500)})
				}
			}
			return out
		},
	},
	{
		name:  "video",
		about: "the same 10 s VP9 clip (640x360, 30 fps) with a short question, every request",
		build: func(g *docGen, clients, per int, mediaURL string) [][][]byte {
			body := chatBody([]message{{"system", systemPrompt}, {"user", []map[string]any{
				{"type": "video_url", "video_url": map[string]any{"url": mediaURL + "/vp9_640x360_30fps_10s.webm"}},
				{"type": "text", "text": "What happens in this clip?"},
			}}})
			return perRequest(clients, per, func(uint64) []byte { return body })
		},
	},
	{
		name:  "image4k",
		about: "the same 3840x2160 JPEG (phone-photo size) with a short question, every request (repeated: the identity cache)",
		build: func(g *docGen, clients, per int, mediaURL string) [][][]byte {
			body := imageBody(mediaURL + "/gen/photo.jpg")
			return perRequest(clients, per, func(uint64) []byte { return body })
		},
	},
	{
		name:  "image4kcold",
		about: "a 3840x2160 JPEG whose bytes differ per request (a serial after its end marker; same pixels), cold every time",
		build: func(g *docGen, clients, per int, mediaURL string) [][][]byte {
			return perRequest(clients, per, func(seed uint64) []byte {
				return imageBody(mediaURL + "/gen/photo.jpg?n=" + strconv.FormatUint(seed+uint64(time.Now().UnixNano()), 10))
			})
		},
	},
	{
		name:  "h264cold",
		about: "a 1280x720 30 fps 10 s H.264 MP4 whose bytes differ per request (a trailing free box; same frames): a cold decode every time, codecs h264",
		build: func(g *docGen, clients, per int, mediaURL string) [][][]byte {
			return perRequest(clients, per, func(seed uint64) []byte {
				return chatBody([]message{{"system", systemPrompt}, {"user", []map[string]any{
					{"type": "video_url", "video_url": map[string]any{"url": mediaURL + "/gen/h264_720p.mp4?n=" + strconv.FormatUint(seed+uint64(time.Now().UnixNano()), 10)}},
					{"type": "text", "text": "What happens in this clip?"},
				}}})
			})
		},
	},
	{
		name:  "image4kcold32",
		about: "32 copies of one cold 3840x2160 JPEG URL in one request (new bytes per request): one fetch and one decode per request",
		build: func(g *docGen, clients, per int, mediaURL string) [][][]byte {
			return perRequest(clients, per, func(seed uint64) []byte {
				u := mediaURL + "/gen/photo.jpg?n=" + strconv.FormatUint(seed+uint64(time.Now().UnixNano()), 10)
				parts := make([]map[string]any, 0, 33)
				for range 32 {
					parts = append(parts, map[string]any{"type": "image_url", "image_url": map[string]any{"url": u}})
				}
				parts = append(parts, map[string]any{"type": "text", "text": "Are these the same photo?"})
				return chatBody([]message{{"system", systemPrompt}, {"user", parts}})
			})
		},
	},
	{
		name:  "png4k",
		about: "the same 3840x2160 PNG screenshot with a short question, every request (repeated: the identity cache)",
		build: func(g *docGen, clients, per int, mediaURL string) [][][]byte {
			body := imageBody(mediaURL + "/gen/screenshot.png")
			return perRequest(clients, per, func(uint64) []byte { return body })
		},
	},
	{
		name:  "png4kcold",
		about: "a 3840x2160 PNG screenshot whose bytes differ per request (a serial after IEND; same pixels), cold every time",
		build: func(g *docGen, clients, per int, mediaURL string) [][][]byte {
			return perRequest(clients, per, func(seed uint64) []byte {
				return imageBody(mediaURL + "/gen/screenshot.png?n=" + strconv.FormatUint(seed+uint64(time.Now().UnixNano()), 10))
			})
		},
	},
	{
		name:  "longword",
		about: "a chat message of one 22 MB run of x (one pre-token): kvroute routes it on load (prompt_too_costly)",
		build: func(g *docGen, clients, per int, _ string) [][][]byte {
			body := chatBody([]message{{"user", strings.Repeat("x", 22<<20)}})
			return perRequest(clients, per, func(uint64) []byte { return body })
		},
	},
}

func imageBody(url string) []byte {
	return chatBody([]message{{"system", systemPrompt}, {"user", []map[string]any{
		{"type": "image_url", "image_url": map[string]any{"url": url}},
		{"type": "text", "text": "What is in this photo?"},
	}}})
}

func init() { workloads = append(workloads, agentWorkloads...) }

func perRequest(clients, per int, f func(seed uint64) []byte) [][][]byte {
	out := make([][][]byte, clients)
	for c := range out {
		for i := 0; i < per; i++ {
			out[c] = append(out[c], f(uint64(c*per+i)+1))
		}
	}
	return out
}
