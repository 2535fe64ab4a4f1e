package simcluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Outcome is one streamed request's result as the client saw it.
type Outcome struct {
	Worker         string // the answering simulator (system_fingerprint)
	Prompt, Cached int    // usage.prompt_tokens, usage.prompt_tokens_details.cached_tokens
	TTFT           time.Duration
	Err            error
}

// Send posts one streamed request (a chat or completions body) to url and reads it to the end: TTFT is the time to the first data
// event; the worker and usage come from the chunks.
func Send(ctx context.Context, client *http.Client, url string, body []byte) Outcome {
	if err := ctx.Err(); err != nil {
		return Outcome{Err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return Outcome{Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	res, err := client.Do(req)
	if err != nil {
		return Outcome{Err: err}
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return Outcome{Err: fmt.Errorf("status %d", res.StatusCode)}
	}
	var o Outcome
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
			return Outcome{Err: fmt.Errorf("chunk %q: %w", line, err)}
		}
		o.Worker = ch.SystemFingerprint
		if ch.Usage != nil {
			o.Prompt, o.Cached = ch.Usage.PromptTokens, ch.Usage.PromptTokensDetails.CachedTokens
		}
	}
	if err := sc.Err(); err != nil {
		return Outcome{Err: err}
	}
	if o.Prompt == 0 {
		return Outcome{Err: fmt.Errorf("no usage in the stream (worker %q)", o.Worker)}
	}
	return o
}
