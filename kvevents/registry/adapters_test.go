package registry_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/kvevents/registry"
)

// TestAdapterRecord: a record's adapters decode from the `adapters` key, get the worker's model as
// base when they name none, are sorted and deduplicated; too many, too long, empty, control
// characters and one name for two base models are refused (records come from the network).
func TestAdapterRecord(t *testing.T) {
	rec := `{"worker_id":"w1","endpoint":"127.0.0.1:8000","model":"Qwen/Qwen3-8B","engine":"vllm","block_size":16,` +
		`"adapters":[{"name":"sql-lora","base_model":"Qwen/Qwen3-8B"},{"name":"chat-lora"},{"name":"sql-lora","base_model":"Qwen/Qwen3-8B"}]}`
	w, err := registry.Decode("w1", []byte(rec))
	if err != nil {
		t.Fatal(err)
	}
	want := []registry.Adapter{{Name: "chat-lora", BaseModel: "Qwen/Qwen3-8B"}, {Name: "sql-lora", BaseModel: "Qwen/Qwen3-8B"}}
	if len(w.Adapters) != len(want) || w.Adapters[0] != want[0] || w.Adapters[1] != want[1] {
		t.Fatalf("adapters %+v, want %+v", w.Adapters, want)
	}
	if a, ok := w.Adapter("sql-lora"); !ok || a.BaseModel != "Qwen/Qwen3-8B" {
		t.Errorf("Adapter(sql-lora) = %+v %v", a, ok)
	}
	if _, ok := w.Adapter("Qwen/Qwen3-8B"); ok {
		t.Error("the base model is listed as an adapter")
	}
	b, _ := w.Encode()
	if !strings.Contains(string(b), `"adapters":[{"name":"chat-lora","base_model":"Qwen/Qwen3-8B"},{"name":"sql-lora","base_model":"Qwen/Qwen3-8B"}]`) {
		t.Errorf("encoded record: %s", b)
	}
	plain, _ := registry.Decode("w1", []byte(`{"worker_id":"w1","endpoint":"127.0.0.1:8000","model":"m","engine":"vllm","block_size":16,"adapters":[]}`))
	if b, _ := plain.Encode(); strings.Contains(string(b), "adapters") {
		t.Errorf("a record without adapters writes the key: %s", b)
	}

	many := make([]registry.Adapter, registry.MaxAdapters+1)
	for i := range many {
		many[i] = registry.Adapter{Name: "a" + strings.Repeat("x", i%7) + string(rune('A'+i%26)) + strings.Repeat("y", i/26)}
	}
	bad := map[string][]registry.Adapter{
		"too many":       many,
		"too long":       {{Name: strings.Repeat("n", registry.MaxAdapterNameBytes+1)}},
		"long base":      {{Name: "a", BaseModel: strings.Repeat("b", registry.MaxAdapterNameBytes+1)}},
		"empty name":     {{Name: ""}},
		"control":        {{Name: "a\nb"}},
		"invalid utf8":   {{Name: "a\xffb"}},
		"two base names": {{Name: "a", BaseModel: "m1"}, {Name: "a", BaseModel: "m2"}},
	}
	for name, as := range bad {
		w := registry.Worker{WorkerID: "w1", Endpoint: "127.0.0.1:8000", Model: "m", Engine: "vllm", BlockSize: 16, Adapters: as}
		if err := w.Normalize(); !errors.Is(err, registry.ErrInvalidWorker) {
			t.Errorf("%s: Normalize = %v, want ErrInvalidWorker", name, err)
		}
	}
	ok := registry.Worker{WorkerID: "w1", Endpoint: "127.0.0.1:8000", Model: "m", Engine: "vllm", BlockSize: 16,
		Adapters: []registry.Adapter{{Name: strings.Repeat("n", registry.MaxAdapterNameBytes)}, {Name: "λ-adapter-日本語"}}}
	if err := ok.Normalize(); err != nil || ok.Adapters[0].BaseModel != "m" {
		t.Errorf("names at the bound: %v %+v", err, ok.Adapters)
	}
}
