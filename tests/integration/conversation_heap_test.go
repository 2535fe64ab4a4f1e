package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/internal/testkit/memtest"
)

// TestConversationHeapThroughCaddy: growing text conversations through the Caddyfile.example chain
// (TLS) with a 4 MiB template cache and a 4 MiB tokenize cache. Every conversation's turns are
// replayed as pieces, so each turn gets a note with its token ids and block hashes (charged to the
// template cache), and every body is read into a pooled buffer. The live heap after GC must not
// grow with the number of conversations once the caches are full: N more conversations (about
// 12 MiB more of message text) leave it within the budgets' noise.
func TestConversationHeapThroughCaddy(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: sends 40 growing conversations of ~18 kB turns through Caddy and measures the live heap after GC, ~3 s")
	}
	w := newFakeWorker(t, "w0")
	e := startEdge(t, edgeConfig{Workers: []string{w.addr()}, App: "\t\ttemplate_cache_size 4MiB\n\t\ttokenize_cache_size 4MiB\n"})
	cl := e.client(false)
	defer cl.CloseIdleConnections()
	serial := 0
	converse := func(n int) {
		for range n {
			serial++
			msgs := []map[string]string{{"role": "system", "content": "You route by the cache."}}
			for turn := range 6 {
				msgs = append(msgs, map[string]string{"role": "user",
					"content": strings.Repeat(fmt.Sprintf("conversation %d turn %d asks about blocks. ", serial, turn), 400)})
				body, err := json.Marshal(map[string]any{"model": "qwen", "messages": msgs})
				if err != nil {
					t.Fatal(err)
				}
				res, err := cl.Post(e.https+"/v1/chat/completions", "application/json", bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					t.Fatalf("conversation %d turn %d: status %d", serial, turn, res.StatusCode)
				}
				msgs = append(msgs, map[string]string{"role": "assistant", "content": strings.Repeat("An answer. ", 200)})
			}
		}
	}
	const n = 10 // each conversation sends 21 distinct messages of ~18 kB: ~4 MiB of JSON
	converse(n)  // fills both caches
	h1 := memtest.LiveHeap()
	converse(3 * n)
	h4 := memtest.LiveHeap()
	t.Logf("live heap (Caddy, worker and test in one process): after %d conversations %d KiB, after %d %d KiB", n, h1>>10, 4*n, h4>>10)
	// Retained notes, message texts or body buffers would grow the heap by the ~12 MiB of JSON
	// the 30 extra conversations sent (more with ids); 6 MiB leaves room for the caches' own
	// turnover and a loaded machine's noise without hiding that.
	if grow := h4 - h1; grow > 6<<20 {
		t.Fatalf("live heap grew %d KiB from %d to %d conversations", grow>>10, n, 4*n)
	}
}
