package router

import (
	"encoding/hex"
	"errors"
	"testing"

	"github.com/zeebo/xxh3"

	"github.com/kvroute/kvroute/reason"
	"github.com/kvroute/kvroute/routing/chat"
	"github.com/kvroute/kvroute/routing/mediaport"
)

// TestAffinityKey: the key is the first fetched undecoded item's bytes hash (prompt order), else
// XXH3-128 of "url:" + the first media URL; audio counts as an item in the credit; a request with
// audio only has no key.
func TestAffinityKey(t *testing.T) {
	k1, k2 := xxh3.HashString128("one").Bytes(), xxh3.HashString128("two").Bytes()
	rs := []resolved{
		{},                                // decoded
		{err: errors.New("fetch failed")}, // no key
		{err: &mediaport.KeyedError{Key: k1, Err: reason.New(reason.UnsupportedCodec, "h264")}},
		{err: &mediaport.KeyedError{Key: k2, Err: reason.New(reason.UnsupportedCodec, "hevc")}},
	}
	if k := fetchedKey(rs); k == nil || *k != k1 {
		t.Fatalf("fetchedKey %v, want the first keyed item's", k)
	}
	if reason.CodeOf(rs[2].err) != reason.UnsupportedCodec || rs[2].err.Error() != "unsupported_codec: h264" {
		t.Errorf("KeyedError changes the code or message: %v", rs[2].err)
	}
	two := &chat.Request{Media: []chat.MediaPart{{URL: "https://m.example/a.mp4"}, {URL: "https://m.example/b.mp4"}}}

	res := &Result{mediaKey: fetchedKey(rs)}
	setAffinity(res, two)
	if a := res.Affinity; a == nil || a.Key != hex.EncodeToString(k1[:]) || a.Source != "bytes" || a.Tokens != 2048 || res.affinity.Key != k1 {
		t.Errorf("bytes key: %+v", res.Affinity)
	}

	res = &Result{}
	two.HasAudio = true
	setAffinity(res, two)
	uk := xxh3.HashString128("url:https://m.example/a.mp4").Bytes()
	if a := res.Affinity; a == nil || a.Key != hex.EncodeToString(uk[:]) || a.Source != "url" || a.Tokens != 3072 {
		t.Errorf("url key: %+v", res.Affinity)
	}

	res = &Result{}
	setAffinity(res, &chat.Request{HasAudio: true})
	if res.Affinity != nil || res.affinity != nil {
		t.Errorf("audio only: %+v", res.Affinity)
	}
}
