package bridge

import (
	"errors"
	"strings"
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

func TestRankEndpoint(t *testing.T) {
	cases := []struct {
		in   string
		r    int
		want string
	}{
		{"tcp://127.0.0.1:5557", 0, "tcp://127.0.0.1:5557"},
		{"tcp://127.0.0.1:5557", 3, "tcp://127.0.0.1:5560"},
		{"tcp://[::1]:5557", 1, "tcp://[::1]:5558"},
		{"tcp://worker-1:5558", 2, "tcp://worker-1:5560"},
		{"inproc://kv", 1, "inproc://kv_dp1"},
		{"ipc:///tmp/kv", 0, "ipc:///tmp/kv"},
	}
	for _, c := range cases {
		if got, err := RankEndpoint(c.in, c.r); err != nil || got != c.want {
			t.Errorf("RankEndpoint(%q, %d) = %q, %v; want %q", c.in, c.r, got, err, c.want)
		}
	}
	for _, bad := range []string{"ipc:///tmp/kv", "tcp://host", "tcp://host:x", "tcp://host:65535"} {
		if got, err := RankEndpoint(bad, 1); err == nil {
			t.Errorf("RankEndpoint(%q, 1) = %q, want error", bad, got)
		}
	}
}

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

func TestParseBlockSize(t *testing.T) {
	page := `# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="32",cache_dtype="auto",enable_prefix_caching="True",kv_block_size="7"} 1.0
`
	if n, err := parseBlockSize(strings.NewReader(page)); err != nil || n != 32 {
		t.Fatalf("parseBlockSize = %d, %v", n, err)
	}
	other := `vllm:cache_config_info{cache_dtype="auto",kv_block_size="7",block_size="16"} 1.0`
	if n, err := parseBlockSize(strings.NewReader(other)); err != nil || n != 16 {
		t.Fatalf("block_size after kv_block_size: %d, %v", n, err)
	}
	for _, bad := range []string{"", "vllm:num_requests_running 0\n", `vllm:cache_config_info{kv_block_size="8"} 1`} {
		if _, err := parseBlockSize(strings.NewReader(bad)); !errors.Is(err, ErrNoBlockSize) {
			t.Errorf("parseBlockSize(%q): err = %v, want ErrNoBlockSize", bad, err)
		}
	}
	if _, err := parseBlockSize(strings.NewReader(`vllm:cache_config_info{block_size="0"} 1`)); err == nil {
		t.Error("block_size 0 accepted")
	}
}
