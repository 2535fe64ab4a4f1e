package bridge

import (
	"bytes"
	"testing"
)

// FuzzParseFrames splits the input into frames at 0xff 0x00 and checks that neither parser panics and
// that an accepted message round-trips its sequence number.
func FuzzParseFrames(f *testing.F) {
	f.Add([]byte("kv-events\xff\x00\x00\x00\x00\x00\x00\x00\x00\x07\xff\x00\x90"))
	f.Add([]byte("\xff\x00\x00\x00\x00\x00\x00\x00\x00\x07\xff\x00x"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		parts := bytes.Split(in, []byte{0xff, 0x00})
		if m, err := ParseFrames(parts); err == nil {
			if !bytes.Equal(seqBytes(m.Seq), parts[1]) || !bytes.Equal(m.Payload, parts[2]) {
				t.Fatalf("ParseFrames(%q) = %+v", parts, m)
			}
		}
		_, _, _ = parseReplayFrames(parts)
	})
}

// BenchmarkRingPush measures keeping one forwarded batch for replay (count-bounded ring at steady state).
func BenchmarkRingPush(b *testing.B) {
	r := newRing(10000, 64<<20)
	p := make([]byte, 2048)
	b.ReportAllocs()
	for i := range b.N {
		r.push(Message{Seq: uint64(i), Payload: p})
	}
}
