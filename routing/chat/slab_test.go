package chat_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/internal/testkit/memtest"

	"github.com/kvroute/kvroute/routing/chat"
)

// TestCachedMessageKeepsOnlyItsOwnNodes: the MessageCache keeps a message's decoded node across
// requests, and the decoder allocates nodes in slabs, so a message's nodes must not share a slab
// with the nodes decoded before it (the root, whose members reach the whole body) or after it
// (the next top-level member). Each body here has one short message (cached with its node)
// between a model and a tool whose description is 1 MiB; after 20 bodies the live heap
// (runtime.GC, then HeapAlloc) must have grown by the short messages, not by the 20 MiB of
// descriptions a shared slab would keep.
func TestCachedMessageKeepsOnlyItsOwnNodes(t *testing.T) {
	mc := chat.NewMessageCache(1 << 30) // nothing is evicted
	heap := memtest.LiveHeap
	base := heap()
	big := strings.Repeat("lorem ipsum ", 1<<20/12)
	for i := range 20 {
		body := fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":"short %d"}],`+
			`"tools":[{"type":"function","function":{"name":"f","description":"%d %s"}}]}`, i, i, big)
		req, err := chat.ParseRequestLimited([]byte(body), chat.Limits{Messages: mc})
		if err != nil || req.SchemaErr != nil {
			t.Fatal(err, req.SchemaErr)
		}
	}
	if st := mc.Stats(); st.Entries != 20 {
		t.Fatalf("cache holds %d entries, want 20", st.Entries)
	}
	h := heap()
	runtime.KeepAlive(mc) // the cache is live while the heap is measured
	if growth := h - min(base, h); growth > 4<<20 {
		t.Fatalf("live heap grew by %d bytes after 20 bodies: the cached messages keep their bodies", growth)
	}
}
