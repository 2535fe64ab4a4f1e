package router

import (
	"encoding/hex"

	"github.com/zeebo/xxh3"

	"github.com/kvroute/kvroute/routing/chat"
	"github.com/kvroute/kvroute/routing/mediaport"
	"github.com/kvroute/kvroute/routing/scheduler"
)

// Affinity for media the router does not decode (DESIGN.md §6, "The media library"): a request
// that falls back on its media (a codec not allowed, an audio part, any media reason) has no
// block hashes for that media, and no KV event tells which worker's engine cached it. It still
// has a stable key, and the key's rendezvous worker among the model's available workers gets
// the media's estimated tokens as a cost credit (scheduler.Affinity), so its repeats reach the
// worker that prefilled it, on every replica alike, while the load bound and the text prefix's
// overlap still count.
//
// The key is XXH3-128 of the first fetched media item that did not decode (its encoded bytes,
// which the router fetched anyway: the same clip under another URL has the same key); when no
// item's bytes were fetched (the fallback came before any fetch: audio_present,
// frontend_decoding_off, client_uuid, …, or every fetch failed), XXH3-128 of "url:" and the first
// media part's URL as sent. A request with only audio parts (whose URLs the parser does not keep)
// has no key and no affinity.

// affinityTokensPerItem is the estimated prompt tokens of one media item the router did not
// decode: the credit per item. A few-second clip at Qwen3-VL's default sampling is 1–3 k tokens
// (the demo's 2294-token prompt), an image a few hundred; 1024 makes the cached media outweigh
// the text prefix of a short message but not a full worker's queued prefill, which the load
// bound caps anyway.
const affinityTokensPerItem = 1024

// Affinity is the affinity of one request, as explain and the [ROUTING] line show it.
type Affinity struct {
	// Key is the media key in hex (32 digits); Source is "bytes" or "url".
	Key    string `json:"key"`
	Source string `json:"source"`
	// WorkerID is the worker the credit went to: the first available worker in the key's
	// rendezvous order that is neither busy nor over the load bound ("" when none was).
	WorkerID string `json:"worker_id"`
	// Tokens is the credit in estimated prompt tokens (affinityTokensPerItem per media item).
	Tokens int `json:"tokens"`
}

// fetchedKey returns the key of the first item (prompt order) whose bytes were fetched and did
// not decode, nil when none.
func fetchedKey(rs []resolved) *mediaport.Key {
	for _, o := range rs {
		if k, ok := mediaport.KeyOf(o.err); ok {
			return &k
		}
	}
	return nil
}

// setAffinity fills res's affinity for a request that fell back on its media.
func setAffinity(res *Result, req *chat.Request) {
	var key mediaport.Key
	source := "bytes"
	switch {
	case res.mediaKey != nil:
		key = *res.mediaKey
	case len(req.Media) > 0 && req.Media[0].URL != "":
		key, source = xxh3.HashString128("url:"+req.Media[0].URL).Bytes(), "url"
	default:
		return
	}
	items := len(req.Media)
	if req.HasAudio {
		items++
	}
	res.affinity = &scheduler.Affinity{Key: key, Tokens: affinityTokensPerItem * max(items, 1)}
	res.Affinity = &Affinity{Key: hex.EncodeToString(key[:]), Source: source, Tokens: res.affinity.Tokens}
}
