package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/natsutil"
	"github.com/kvroute/kvroute/internal/testkit/natstest"
	"github.com/kvroute/kvroute/kvevents/registry"
)

// vllmModels is a /v1/models page shaped as vLLM's (serving_models.py show_available_models): the
// base model with parent null, then one card per LoRA adapter with root = its path and parent = the
// base model.
func vllmModels(adapters ...string) string {
	cards := []string{`{"id":"Qwen/Qwen3-8B","object":"model","created":1,"owned_by":"vllm","root":"/models/qwen3-8b","parent":null,"max_model_len":32768,"permission":[]}`}
	for _, a := range adapters {
		cards = append(cards, fmt.Sprintf(`{"id":%q,"object":"model","created":1,"owned_by":"vllm","root":"/adapters/%s","parent":"Qwen/Qwen3-8B","max_model_len":null,"permission":[]}`, a, a))
	}
	return `{"object":"list","data":[` + strings.Join(cards, ",") + `]}`
}

// TestBridgeRegistersAdapters: the bridge lists the engine's LoRA adapters (model cards with a
// parent; /v1/models behind vLLM's --api-key, the key read from --engine-api-key-file) in the worker
// record at registration, and an adapter loaded at run time appears in the
// record after the next refresh; one unloaded leaves it.
func TestBridgeRegistersAdapters(t *testing.T) {
	var page atomic.Value
	page.Store(vllmModels("sql-lora"))
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Authorization") != "Bearer s3cret-key" { // vLLM --api-key s3cret-key
			http.Error(w, `{"error":"Unauthorized"}`, http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, page.Load().(string))
	}))
	defer engine.Close()
	defer http.DefaultClient.CloseIdleConnections()
	srv := natstest.Start(t)
	nc, err := natsutil.Connect(srv.ClientURL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	kv := natstest.Bucket(t, nc)
	keyFile := write(t, t.TempDir(), "engine.key", "s3cret-key\n")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--nats-url", srv.ClientURL(), "--worker-id", "w7", "--endpoint", engine.URL,
			"--model", "Qwen/Qwen3-8B", "--block-size", "16", "--zmq-endpoint", "tcp://127.0.0.1:1",
			"--adapters-refresh", "50ms", "--engine-api-key-file", keyFile, "--log-level", "error"}, io.Discard)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run = %v", err)
		}
	}()
	waitAdapters := func(want string) {
		t.Helper()
		got := ""
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			e, err := kv.Get(context.Background(), "w7")
			if err != nil {
				continue
			}
			rec, err := registry.Decode("w7", e.Value())
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, a := range rec.Adapters {
				if a.BaseModel != "Qwen/Qwen3-8B" {
					t.Fatalf("adapter %+v: base model is not the parent", a)
				}
				names = append(names, a.Name)
			}
			if got = strings.Join(names, ","); got == want {
				return
			}
		}
		t.Fatalf("record adapters %q, want %q", got, want)
	}
	waitAdapters("sql-lora")
	page.Store(vllmModels("sql-lora", "chat-lora")) // POST /v1/load_lora_adapter on the engine
	waitAdapters("chat-lora,sql-lora")
	page.Store(vllmModels("chat-lora"))
	waitAdapters("chat-lora")
}
