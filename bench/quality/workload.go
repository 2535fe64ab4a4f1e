package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
)

// request is one request of a workload, in send order.
type request struct {
	// Body is the chat completions body (streamed, usage included).
	Body []byte
	// After is the index of the request that must have finished before this one is sent (a chat's
	// previous turn), or -1.
	After int
	// Kind labels the request for the report: "clip", "chat" or "doc".
	Kind string
}

// workloadConfig sizes a workload.
type workloadConfig struct {
	N, MaxTokens int
	Seed         uint64
	// Clips is the number of distinct clip stand-ins (workload video); Chats the number of
	// conversations; Docs the document length in words (workload docs).
	Clips, ClipWords, Chats, DocWords int
}

// vocabulary is the word list the stand-in texts draw from: common English words, one token each
// in the Qwen tokenizer most of the time, so a text of n words is about n tokens.
var vocabulary = strings.Fields(`time year people way day man thing woman life child world school state family
student group country problem hand part place case week company system program question work government number
night point home water room mother area money story fact month lot right study book eye job word business issue
side kind head house service friend father power hour game line end member law car city community name president
team minute idea kid body information back parent face others level office door health person art war history
party result change morning reason research girl guy moment air teacher force education foot boy age policy
process music market sense nation plan college interest death experience effect use class control care field
development role effort rate heart drug show leader light voice wife police mind price report decision son view
relationship town road arm difference value building action model season society tax director position player
record paper space ground form event official matter center couple site project activity star table need court
oil situation cost industry figure street image phone data picture practice piece land product doctor wall
patient worker news test movie north love support technology step baby computer type attention film tree source
organization hair window evidence population site truth`)

const systemPrompt = "You are a careful video analyst. Answer questions about the clip the user shares. " +
	"Describe only what is visible, name objects and actions precisely, give times in seconds from the start " +
	"of the clip, and say so when something cannot be seen."

var questions = []string{
	"What happens in this clip?",
	"List every object that moves.",
	"How many people appear, and when?",
	"Describe the camera motion.",
	"What is the last thing visible?",
}

// text returns n words drawn from the vocabulary with r.
func text(r *rand.Rand, n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = vocabulary[r.IntN(len(vocabulary))]
	}
	return strings.Join(w, " ")
}

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

func body(msgs []message, maxTokens int) []byte {
	b, err := json.Marshal(map[string]any{
		"model": "kvroute-sim", "messages": msgs, "max_tokens": maxTokens, "stream": true,
		"stream_options": map[string]bool{"include_usage": true},
	})
	if err != nil {
		panic(err) // maps of strings and ints always marshal
	}
	return b
}

// videoWorkload is workload A: Zipf-drawn clips (text stand-ins of ClipWords words: the clip's
// placeholder run as it would sit in the prompt) behind a fixed system prompt, each with one of 5
// questions, mixed with growing multi-turn chats (about a quarter of the requests).
func videoWorkload(c workloadConfig) []request {
	r := rand.New(rand.NewPCG(c.Seed, 0xc11b))
	clips := make([]string, c.Clips)
	for i := range clips {
		clips[i] = fmt.Sprintf("[clip %d] %s", i, text(r, c.ClipWords))
	}
	zipf := rand.NewZipf(r, 1.1, 1, uint64(c.Clips-1))
	type chat struct {
		msgs []message
		last int // index of the previous turn's request, or -1
	}
	chats := make([]*chat, c.Chats)
	for i := range chats {
		chats[i] = &chat{msgs: []message{{Role: "system", Content: systemPrompt}}, last: -1}
	}
	out := make([]request, 0, c.N)
	for len(out) < c.N {
		if c.Chats > 0 && r.IntN(4) == 0 {
			ch := chats[r.IntN(len(chats))]
			if len(ch.msgs) > 1 {
				ch.msgs = append(ch.msgs, message{Role: "assistant", Content: text(r, 40)})
			}
			ch.msgs = append(ch.msgs, message{Role: "user", Content: text(r, 30) + "?"})
			out = append(out, request{Body: body(ch.msgs, c.MaxTokens), After: ch.last, Kind: "chat"})
			ch.last = len(out) - 1
			continue
		}
		clip := clips[zipf.Uint64()]
		q := questions[r.IntN(len(questions))]
		out = append(out, request{Body: body([]message{{Role: "system", Content: systemPrompt},
			{Role: "user", Content: clip + "\n" + q}}, c.MaxTokens), After: -1, Kind: "clip"})
	}
	return out
}

// docsWorkload is workload B: distinct long documents (DocWords words) behind the same system
// prompt, with few repeats (one request in ten asks again about one of the last 20 documents), so
// that load, not the cache, decides.
func docsWorkload(c workloadConfig) []request {
	r := rand.New(rand.NewPCG(c.Seed, 0xd0c5))
	var docs []string
	out := make([]request, 0, c.N)
	for len(out) < c.N {
		var doc string
		if len(docs) > 0 && r.IntN(10) == 0 {
			doc = docs[max(0, len(docs)-1-r.IntN(20))]
		} else {
			doc = fmt.Sprintf("[document %d] %s", len(docs), text(r, c.DocWords))
			docs = append(docs, doc)
		}
		q := questions[r.IntN(len(questions))]
		out = append(out, request{Body: body([]message{{Role: "system", Content: systemPrompt},
			{Role: "user", Content: doc + "\n" + q}}, c.MaxTokens), After: -1, Kind: "doc"})
	}
	return out
}
