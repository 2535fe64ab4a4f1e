package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

func init() {
	register("explain", "explain --admin ADDR [--path /v1/chat/completions] < request.json", runExplain)
}

func runExplain(args []string) (any, error) {
	return explain(args, os.Stdin, http.DefaultClient)
}

// explain implements `kvroute explain` (DESIGN.md §10a): it posts a chat request body read from
// stdin to the admin endpoint's POST /kvroute/explain and prints what it returns. Nothing is
// forwarded to a worker.
func explain(args []string, stdin io.Reader, client *http.Client) (any, error) {
	fs := newFlags("explain")
	admin := fs.String("admin", "", "Caddy admin address (host:port or URL)")
	path := fs.String("path", "", "request path to explain (default /v1/chat/completions)")
	timeout := fs.Duration("timeout", 60*time.Second, "request timeout")
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if *admin == "" {
		return nil, errors.New("explain: --admin ADDR is required")
	}
	body, err := io.ReadAll(io.LimitReader(stdin, maxRequestBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading request: %w", err)
	}
	if len(body) > maxRequestBytes {
		return nil, fmt.Errorf("explain: request over %d bytes", maxRequestBytes)
	}
	base := *admin
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	u, err := url.Parse(strings.TrimSuffix(base, "/") + "/kvroute/explain")
	if err != nil {
		return nil, fmt.Errorf("explain: admin address: %w", err)
	}
	if *path != "" {
		u.RawQuery = url.Values{"path": {*path}}.Encode()
	}
	c := *client
	c.Timeout = *timeout
	res, err := c.Post(u.String(), "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("posting to %s: %w", u, err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("reading explain response: %w", err)
	}
	var v json.RawMessage
	if err := json.Unmarshal(out, &v); err != nil {
		return nil, fmt.Errorf("explain: %s answered %s: %s", u, res.Status, bytes.TrimSpace(out))
	}
	if res.StatusCode != http.StatusOK {
		var e struct {
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(out, &e) == nil && len(e.Error) > 0 {
			return nil, fmt.Errorf("explain: %s: %s", res.Status, e.Error)
		}
		return nil, fmt.Errorf("explain: %s: %s", res.Status, bytes.TrimSpace(out))
	}
	return v, nil
}
