package bridge

import (
	"testing"
)

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
