package bridge

import (
	"strings"
	"testing"
)

func TestRing(t *testing.T) {
	r := newRing(4, 100)
	for s := uint64(10); s < 16; s++ {
		r.push(Message{Seq: s, Payload: []byte(strings.Repeat("x", 10))})
	}
	if r.len() != 4 || r.oldest() != 12 || r.newest() != 15 {
		t.Fatalf("count bound: len %d range %d..%d", r.len(), r.oldest(), r.newest())
	}
	if got := r.from(13); len(got) != 3 || got[0].Seq != 13 || got[2].Seq != 15 {
		t.Fatalf("from(13) = %+v", got)
	}
	if r.from(11) != nil || r.from(16) != nil {
		t.Fatal("from outside the held range must be nil")
	}
	if m, ok := r.get(14); !ok || m.Seq != 14 {
		t.Fatalf("get(14) = %+v, %v", m, ok)
	}
	// Byte bound: a 75-byte payload evicts the oldest by count (12) and then by bytes (13).
	r.push(Message{Seq: 16, Payload: make([]byte, 75)})
	if r.bytes != 95 || r.newest() != 16 || r.oldest() != 14 {
		t.Fatalf("byte bound: bytes %d range %d..%d", r.bytes, r.oldest(), r.newest())
	}
	// Too large to keep: the ring empties (it could not replay a contiguous range any more).
	r.push(Message{Seq: 17, Payload: make([]byte, 101)})
	if r.len() != 0 || r.bytes != 0 {
		t.Fatalf("oversized payload: len %d bytes %d", r.len(), r.bytes)
	}
	// A discontinuity clears the ring.
	r.push(Message{Seq: 20})
	r.push(Message{Seq: 21})
	r.push(Message{Seq: 30})
	if r.len() != 1 || r.oldest() != 30 {
		t.Fatalf("discontinuity: len %d oldest %d", r.len(), r.oldest())
	}
	// Growth past the initial capacity with wrap-around keeps order.
	big := newRing(100, 1<<20)
	for s := uint64(0); s < 250; s++ {
		big.push(Message{Seq: s, Payload: []byte{byte(s)}})
	}
	all := big.from(150)
	if len(all) != 100 || big.bytes != 100 {
		t.Fatalf("growth: %d entries, %d bytes", len(all), big.bytes)
	}
	for i, m := range all {
		if m.Seq != uint64(150+i) || m.Payload[0] != byte(150+i) {
			t.Fatalf("growth: entry %d = %+v", i, m)
		}
	}
}
