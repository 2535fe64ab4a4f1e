package caddymodule

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/routing/router"
)

// TestResponseRefID: which requests must reach a stored response's worker.
func TestResponseRefID(t *testing.T) {
	for _, c := range []struct {
		method, path, prev, want string
	}{
		{"POST", "/v1/responses", "resp_1", "resp_1"},
		{"POST", "/v1/responses", "", ""},
		{"GET", "/v1/responses/resp_2", "", "resp_2"},
		{"DELETE", "/openai/v1/responses/resp_3", "", "resp_3"},
		{"POST", "/v1/responses/resp_4/cancel", "", "resp_4"},
		{"GET", "/v1/responses/resp_5/cancel", "", ""},
		{"POST", "/v1/responses/resp_6", "", ""},
		{"GET", "/v1/responses/resp_7/input_items", "", ""},
		{"GET", "/v1/responses/", "", ""},
		{"GET", "/v1/models", "", ""},
	} {
		r := httptest.NewRequest(c.method, c.path, nil)
		d := &Decision{Result: router.Result{PreviousResponseID: c.prev}}
		if got := responseRefID(r, d); got != c.want {
			t.Errorf("%s %s (prev %q): %q, want %q", c.method, c.path, c.prev, got, c.want)
		}
	}
}

// TestIDSniffer: the id is learned from a streamed answer written in small pieces, the bytes pass
// unchanged; error answers and compressed ones are not learned from.
func TestIDSniffer(t *testing.T) {
	stream := "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_abc\",\"status\":\"in_progress\"}}\n\n"
	for _, c := range []struct {
		status   int
		encoding string
		want     string
	}{{200, "", "resp_abc"}, {404, "", ""}, {200, "gzip", ""}} {
		rec := httptest.NewRecorder()
		var learned []string
		s := &idSniffer{ResponseWriter: rec, learn: func(id string) { learned = append(learned, id) }}
		if c.encoding != "" {
			s.Header().Set("Content-Encoding", c.encoding)
		}
		s.WriteHeader(c.status)
		for i := 0; i < len(stream); i += 7 {
			_, _ = s.Write([]byte(stream[i:min(i+7, len(stream))]))
		}
		_, _ = s.Write([]byte(strings.Repeat(`{"id":"later"}`, 3)))
		if rec.Body.String() != stream+strings.Repeat(`{"id":"later"}`, 3) {
			t.Fatalf("bytes changed")
		}
		if (c.want == "" && len(learned) != 0) || (c.want != "" && (len(learned) != 1 || learned[0] != c.want)) {
			t.Errorf("status %d encoding %q: learned %v, want %q", c.status, c.encoding, learned, c.want)
		}
		if rec.Code != c.status {
			t.Errorf("status %d passed as %d", c.status, rec.Code)
		}
	}
}
