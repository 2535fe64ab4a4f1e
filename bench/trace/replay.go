package main

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/kvroute/kvroute/bench/internal/simcluster"
)

// outcome is what the client saw of one request.
type outcome = simcluster.Outcome

// completionBody is the streamed /v1/completions body of one record: the token-id prompt and
// max_tokens = the record's output length, capped at maxOut (at least 1).
func completionBody(prompt []uint32, outLen, maxOut int) ([]byte, error) {
	return json.Marshal(map[string]any{
		"model": "kvroute-sim", "prompt": prompt, "max_tokens": max(1, min(outLen, maxOut)),
		"stream": true, "stream_options": map[string]bool{"include_usage": true},
	})
}

// replay sends bodies open loop: body i leaves at start + at[i] whatever the earlier ones are
// doing. Every request is cancelled at deadline; it then counts as an error.
func replay(ctx context.Context, client *http.Client, base string, bodies [][]byte, at []time.Duration, deadline time.Duration) []outcome {
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	out := make([]outcome, len(bodies))
	start := time.Now()
	var wg sync.WaitGroup
	for i := range bodies {
		if d := time.Until(start.Add(at[i])); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
			}
		}
		wg.Go(func() { out[i] = simcluster.Send(ctx, client, base+"/v1/completions", bodies[i]) })
	}
	wg.Wait()
	return out
}
