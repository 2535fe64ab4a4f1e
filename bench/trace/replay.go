package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// outcome is what the client saw of one request.
type outcome struct {
	Worker         string // the answering simulator (system_fingerprint)
	Prompt, Cached int    // usage.prompt_tokens, usage.prompt_tokens_details.cached_tokens
	TTFT           time.Duration
	Err            error
}

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
		wg.Go(func() { out[i] = send(ctx, client, base, bodies[i]) })
	}
	wg.Wait()
	return out
}

// send posts one streamed completions request and reads it to the end: TTFT is the time to the
// first data event; the worker and usage come from the chunks.
func send(ctx context.Context, client *http.Client, base string, body []byte) outcome {
	if err := ctx.Err(); err != nil {
		return outcome{Err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		return outcome{Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	res, err := client.Do(req)
	if err != nil {
		return outcome{Err: err}
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return outcome{Err: fmt.Errorf("status %d", res.StatusCode)}
	}
	var o outcome
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if o.TTFT == 0 {
			o.TTFT = time.Since(start)
		}
		if line == "[DONE]" {
			break
		}
		var ch struct {
			SystemFingerprint string `json:"system_fingerprint"`
			Usage             *struct {
				PromptTokens        int `json:"prompt_tokens"`
				PromptTokensDetails struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(line), &ch); err != nil {
			return outcome{Err: fmt.Errorf("chunk %q: %w", line, err)}
		}
		o.Worker = ch.SystemFingerprint
		if ch.Usage != nil {
			o.Prompt, o.Cached = ch.Usage.PromptTokens, ch.Usage.PromptTokensDetails.CachedTokens
		}
	}
	if err := sc.Err(); err != nil {
		return outcome{Err: err}
	}
	if o.Prompt == 0 {
		return outcome{Err: fmt.Errorf("no usage in the stream (worker %q)", o.Worker)}
	}
	return o
}
