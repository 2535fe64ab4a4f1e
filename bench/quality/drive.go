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

// drive sends the requests in order with `concurrency` clients; a request whose After is set waits
// until that request finished (a chat turn follows its previous turn).
func drive(ctx context.Context, client *http.Client, base string, reqs []request, concurrency int) []outcome {
	out := make([]outcome, len(reqs))
	done := make([]chan struct{}, len(reqs))
	for i := range done {
		done[i] = make(chan struct{})
	}
	next := make(chan int)
	go func() {
		defer close(next)
		for i := range reqs {
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for i := range next {
				if a := reqs[i].After; a >= 0 {
					<-done[a] // taken earlier by a client that waits on nothing later: no deadlock
				}
				out[i] = send(ctx, client, base, reqs[i].Body)
				close(done[i])
			}
		})
	}
	wg.Wait()
	return out
}

// send posts one streamed request and reads it to the end: TTFT is the time to the first data
// event; the worker and usage come from the chunks.
func send(ctx context.Context, client *http.Client, base string, body []byte) outcome {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", bytes.NewReader(body))
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
