package registry_test

import (
	"errors"
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/kvevents/registry"
)

func TestNormalizeEndpoint(t *testing.T) {
	cases := []struct{ in, want string }{
		{"127.0.0.1:8000", "127.0.0.1:8000"},
		{"http://127.0.0.1:8000", "127.0.0.1:8000"},
		{"http://127.0.0.1:8000/v1", "127.0.0.1:8000"},
		{"https://Worker-1.Example", "worker-1.example:443"},
		{"worker-1", "worker-1:80"},
		{"[::1]:9000", "[::1]:9000"},
		{"http://[::1]", "[::1]:80"},
		{"localhost:8000/", "localhost:8000"},
	}
	for _, c := range cases {
		got, err := registry.NormalizeEndpoint(c.in)
		if err != nil || got != c.want {
			t.Errorf("NormalizeEndpoint(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "ftp://x:1", "host:0", "host:70000", "host:abc", "a b:80"} {
		if got, err := registry.NormalizeEndpoint(bad); err == nil {
			t.Errorf("NormalizeEndpoint(%q) = %q, want error", bad, got)
		}
	}
}

func TestWorkerValidation(t *testing.T) {
	good := func() registry.Worker {
		return registry.Worker{WorkerID: "w-1_A", Endpoint: "http://127.0.0.1:8001", Model: "m", Engine: "vllm", BlockSize: 16}
	}
	w := good()
	if err := w.Normalize(); err != nil {
		t.Fatal(err)
	}
	if w.Endpoint != "127.0.0.1:8001" || w.DPSize != 1 {
		t.Errorf("normalized = %+v", w)
	}
	long := make([]byte, 65)
	for i := range long {
		long[i] = 'a'
	}
	bad := map[string]func(*registry.Worker){
		"empty id":      func(w *registry.Worker) { w.WorkerID = "" },
		"id with dot":   func(w *registry.Worker) { w.WorkerID = "w.1" },
		"id with space": func(w *registry.Worker) { w.WorkerID = "w 1" },
		"id too long":   func(w *registry.Worker) { w.WorkerID = string(long) },
		"no endpoint":   func(w *registry.Worker) { w.Endpoint = "" },
		"no model":      func(w *registry.Worker) { w.Model = "" },
		"bad engine":    func(w *registry.Worker) { w.Engine = "tgi" },
		"zero block":    func(w *registry.Worker) { w.BlockSize = 0 },
		"negative dp":   func(w *registry.Worker) { w.DPSize = -1 },
		"bad contract":  func(w *registry.Worker) { w.Contract = []byte("{") },
	}
	for name, mutate := range bad {
		w := good()
		mutate(&w)
		if err := w.Normalize(); !errors.Is(err, registry.ErrInvalidWorker) {
			t.Errorf("%s: err = %v, want ErrInvalidWorker", name, err)
		}
	}
	if !registry.ValidWorkerID(string(long[:64])) {
		t.Error("64-char id rejected")
	}
}

func TestEncodeDecode(t *testing.T) {
	w := registry.Worker{WorkerID: "w1", Endpoint: "127.0.0.1:8001", Model: "m", Engine: "sglang", EngineVersion: "0.5",
		BlockSize: 16, DPSize: 2, Features: []string{"mm_hashes"}, Contract: []byte(`{"schema":"kvroute.video_contract/v1"}`)}
	b, err := w.Encode()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"worker_id":"w1","endpoint":"127.0.0.1:8001","model":"m","engine":"sglang","engine_version":"0.5","block_size":16,"dp_size":2,"features":["mm_hashes"],"contract":{"schema":"kvroute.video_contract/v1"}}`
	if string(b) != want {
		t.Errorf("Encode = %s\nwant     %s", b, want)
	}
	got, err := registry.Decode("w1", b)
	if err != nil || got.WorkerID != "w1" || !got.HasFeature(kv.FeatureMMHashes) || string(got.Contract) != `{"schema":"kvroute.video_contract/v1"}` {
		t.Errorf("Decode = %+v, %v", got, err)
	}
	if _, err := registry.Decode("w2", b); !errors.Is(err, registry.ErrInvalidWorker) {
		t.Errorf("key mismatch: err = %v", err)
	}
	if _, err := registry.Decode("w1", []byte("not json")); !errors.Is(err, registry.ErrInvalidWorker) {
		t.Errorf("garbage: err = %v", err)
	}
}

func TestMerge(t *testing.T) {
	static := []registry.Worker{{WorkerID: "b", Model: "static"}}
	live := []registry.Worker{{WorkerID: "c"}, {WorkerID: "b", Model: "live"}, {WorkerID: "a"}}
	got := registry.Merge(static, live)
	if len(got) != 3 || got[0].WorkerID != "a" || got[1].WorkerID != "b" || got[1].Model != "static" || got[2].WorkerID != "c" {
		t.Errorf("Merge = %+v", got)
	}
}
