package apis_test

import (
	"testing"

	"github.com/kvroute/kvroute/routing/apis"
)

// TestScanResponseID: the id of a plain and of a streamed Responses answer (shapes as vLLM writes
// them), a prefix cut inside the value, and bodies without an id.
func TestScanResponseID(t *testing.T) {
	for _, c := range []struct {
		in   string
		id   string
		want bool
	}{
		{`{"id":"resp_7f3a","created_at":1733390000,"object":"response"}`, "resp_7f3a", true},
		{`{ "id" : "resp_sp" }`, "resp_sp", true},
		{"event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_s1\",\"object\":\"response\"}}\n\n", "resp_s1", true},
		{`{"text":"the word \"id\" in text","id":"resp_after"}`, "resp_after", true},
		{`{"id":"resp_cu`, "", false},
		{`{"object":"error","message":"x"}`, "", false},
		{`{"id":""}`, "", false},
	} {
		id, ok := apis.ScanResponseID([]byte(c.in))
		if id != c.id || ok != c.want {
			t.Errorf("%q: got %q %v, want %q %v", c.in, id, ok, c.id, c.want)
		}
	}
}
