package bridge

import (
	"errors"
	"testing"
)

func TestParseFrames(t *testing.T) {
	m, err := ParseFrames([][]byte{[]byte("kv-events"), {0, 0, 0, 0, 0, 0, 1, 2}, []byte("payload")})
	if err != nil || m.Seq != 258 || string(m.Payload) != "payload" {
		t.Fatalf("ParseFrames = %+v, %v", m, err)
	}
	bad := map[string][][]byte{
		"two frames":     {[]byte(""), {0, 0, 0, 0, 0, 0, 0, 1}},
		"four frames":    {[]byte(""), {0, 0, 0, 0, 0, 0, 0, 1}, nil, nil},
		"7-byte seq":     {[]byte(""), {0, 0, 0, 0, 0, 0, 1}, []byte("x")},
		"9-byte seq":     {[]byte(""), {0, 0, 0, 0, 0, 0, 0, 0, 1}, []byte("x")},
		"no frames":      nil,
		"empty seq":      {[]byte(""), {}, []byte("x")},
		"one frame only": {[]byte("x")},
	}
	for name, parts := range bad {
		if _, err := ParseFrames(parts); !errors.Is(err, ErrFrame) {
			t.Errorf("%s: err = %v, want ErrFrame", name, err)
		}
	}
}

func TestParseReplayFrames(t *testing.T) {
	seq := seqBytes(7)
	end := seqBytes(endSeq)
	// SGLang and vLLM before the topic frame: [b"", seq, payload]; newer vLLM: [b"", topic, seq, payload].
	for _, parts := range [][][]byte{{{}, seq, []byte("p")}, {{}, []byte("kv"), seq, []byte("p")}, {{}, {}, seq, []byte("p")}} {
		m, isEnd, err := parseReplayFrames(parts)
		if err != nil || isEnd || m.Seq != 7 || string(m.Payload) != "p" {
			t.Errorf("parseReplayFrames(%q) = %+v, %v, %v", parts, m, isEnd, err)
		}
	}
	for _, parts := range [][][]byte{{{}, end, {}}, {{}, {}, end, {}}} {
		if _, isEnd, err := parseReplayFrames(parts); err != nil || !isEnd {
			t.Errorf("sentinel %q: end=%v err=%v", parts, isEnd, err)
		}
	}
	for _, parts := range [][][]byte{nil, {[]byte("x"), seq, {}}, {{}, seq}, {{}, {1, 2}, {}}, {{}, {}, {}, seq, {}}} {
		if _, _, err := parseReplayFrames(parts); !errors.Is(err, ErrFrame) {
			t.Errorf("parseReplayFrames(%q): err = %v, want ErrFrame", parts, err)
		}
	}
}
