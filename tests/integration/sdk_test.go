package integration

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/sim"
	"github.com/kvroute/kvroute/internal/testkit"
)

// TestSDKClients runs the npm `openai` client's responses.create (plain and streamed, with
// previous_response_id, then responses.retrieve) and `@anthropic-ai/sdk`'s messages.create and
// messages.stream through the TLS edge (the Caddyfile.example chain) in front of two simulators:
// the clients work unchanged (their requests and the SSE streams pass the edge as they are), and
// the follow-up and the retrieve reach the storing worker (its cached tokens show it: the two
// simulators publish no KV events here, so nothing else would pick that worker). The packages are pinned in
// sdk/package.json and its lock file; `make deps` installs them (the test fails, saying so, when
// they are missing: tests use loopback only). It skips only when node is not installed.
func TestSDKClients(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: runs the npm openai and anthropic clients in node processes through Caddy")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed (make deps installs nodejs and npm): the npm SDK clients cannot run")
	}
	sdkDir, _ := filepath.Abs("sdk")
	for _, pkg := range []string{"openai", "@anthropic-ai/sdk"} {
		if _, err := os.Stat(filepath.Join(sdkDir, "node_modules", pkg, "package.json")); err != nil {
			// tests use loopback only: the packages come from `make deps`, never from the test
			t.Fatalf("npm package %s is not installed in %s: run `make deps` (npm ci there)", pkg, sdkDir)
		}
	}
	m, lm := testkit.Models(t, modelDir)
	var eps []string
	for _, id := range []string{"sdk-a", "sdk-b"} {
		fe, err := sim.NewFrontend(&sim.FrontendConfig{ModelDir: modelDir, Model: m, LayoutModel: lm, Contract: []byte(sim.HubContract)})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(sim.New(&sim.Config{WorkerID: id, Model: "qwen", Frontend: fe}).Handler())
		t.Cleanup(ts.Close)
		eps = append(eps, ts.Listener.Addr().String())
	}
	e := startEdge(t, edgeConfig{Workers: eps})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(sdkDir, "run.mjs"), e.https)
	cmd.Dir = sdkDir
	cmd.Env = append(os.Environ(), "NODE_EXTRA_CA_CERTS="+filepath.Join(e.dir, "storage", "pki", "authorities", "local", "root.crt"))
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("node run.mjs: %v\n%s\n%s", err, out, stderr)
	}
	var got struct {
		Responses struct {
			ID, Text string
			Cached   int
		}
		ResponsesStream struct {
			Text, ID string
			Events   int
			Cached   int
		} `json:"responses_stream"`
		ResponsesGet string `json:"responses_get"`
		Messages     struct {
			Text      string
			CacheRead int `json:"cache_read"`
		}
		MessagesStream struct {
			Text, Final string
			CacheRead   int `json:"cache_read"`
		} `json:"messages_stream"`
		MessagesError struct {
			Status            int
			Class, Type, Code string
			ErrorType         string `json:"error_type"`
		} `json:"messages_error"`
		ResponsesError struct {
			Status            int
			Class, Code, Type string
		} `json:"responses_error"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	const want8 = "The cache is warm, the route is" // the simulator's 8-token completion
	if got.Responses.ID == "" || got.Responses.Text != want8 || got.Responses.Cached != 0 {
		t.Fatalf("responses.create: %+v", got.Responses)
	}
	if got.ResponsesStream.Text != want8 || got.ResponsesStream.ID == "" || got.ResponsesStream.Events < 8 || got.ResponsesStream.Cached == 0 {
		t.Fatalf("responses stream (previous_response_id): %+v — a follow-up on another worker would be a 404", got.ResponsesStream)
	}
	if got.ResponsesGet != got.ResponsesStream.ID {
		t.Fatalf("responses.retrieve: %q, want %q", got.ResponsesGet, got.ResponsesStream.ID)
	}
	if got.Messages.Text != want8 || got.MessagesStream.Text != want8 || got.MessagesStream.Final != want8 {
		t.Fatalf("messages: %+v %+v", got.Messages, got.MessagesStream)
	}
	// kvroute's own errors in each client's shape: Anthropic's {"type":"error","error":{"type",
	// "message"}} (with the reason code kept in error.code) and the OpenAI form.
	if e := got.MessagesError; e.Status != 400 || e.Class != "BadRequestError" || e.Type != "error" || e.ErrorType != "invalid_request_error" || e.Code != "media_url_blocked" {
		t.Fatalf("messages.create with a loopback image URL: %+v, want a 400 BadRequestError, type error, error.type invalid_request_error, error.code media_url_blocked", e)
	}
	if e := got.ResponsesError; e.Status != 400 || e.Class != "BadRequestError" || e.Code != "media_url_blocked" || e.Type != "" {
		t.Fatalf("responses.create with a loopback image URL: %+v, want a 400 BadRequestError with code media_url_blocked", e)
	}
}
