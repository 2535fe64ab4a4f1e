package sim_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/internal/sim"
	"github.com/kvroute/kvroute/internal/testkit"
	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/kvevents/codec"
)

// tenantSeed is the seed of LoRA "tenant-42" in testdata/golden/block_hash.jsonl (bh_seed_006).
const tenantSeed = 17185577506994870600

// TestLoRAServedLikeVLLM: a simulator with --lora-modules lists the adapter in /v1/models with its
// parent; a request on the adapter publishes a BlockStored with lora_name and lora_id whose extra
// keys start with the adapter name, normalizing to the golden seed's hashes; its repeat hits, while
// the same prompt on the base model hits nothing (another chain) and vice versa; an adapter loaded at
// run time is served, one unloaded is 404 like an unknown model.
func TestLoRAServedLikeVLLM(t *testing.T) {
	for name, form := range map[string]codec.Form{"map events": codec.MapForm, "array events": codec.ArrayForm} {
		t.Run(name, func(t *testing.T) { testLoRAServed(t, form) })
	}
}

func testLoRAServed(t *testing.T, form codec.Form) {
	rec := &recorder{}
	pub, err := sim.NewPublisher(&sim.PublisherConfig{WorkerID: "w1", OnPublish: rec.add, EventForm: form})
	if err != nil {
		t.Fatal(err)
	}
	mod, err := sim.ParseLoRAModule("tenant-42=/adapters/tenant-42")
	if err != nil {
		t.Fatal(err)
	}
	s := sim.New(&sim.Config{WorkerID: "w1", Model: "qwen", Frontend: newFrontend(t, &fakeMedia{}, nil), Events: pub, LoRAModules: []sim.LoRAModule{mod}})
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	defer http.DefaultClient.CloseIdleConnections()

	res, err := http.Get(ts.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var models struct {
		Data []struct {
			ID, Root string
			Parent   *string
		}
	}
	if err := json.Unmarshal(b, &models); err != nil || len(models.Data) != 2 || models.Data[0].ID != "qwen" || models.Data[0].Parent != nil ||
		models.Data[1].ID != "tenant-42" || models.Data[1].Parent == nil || *models.Data[1].Parent != "qwen" || models.Data[1].Root != "/adapters/tenant-42" {
		t.Fatalf("/v1/models: %s", b)
	}
	if as := s.Record("127.0.0.1:1").Adapters; len(as) != 1 || as[0].Name != "tenant-42" || as[0].BaseModel != "qwen" {
		t.Fatalf("record adapters %+v", as)
	}

	body := strings.Replace(textBody, `"model":"qwen"`, `"model":"tenant-42"`, 1)
	body = strings.Replace(body, `,"cache_salt":"tenant-7"`, "", 1)
	baseBody := strings.Replace(body, `"model":"tenant-42"`, `"model":"qwen"`, 1)
	m, _ := testkit.Models(t, modelDir)
	_, _, ids := testkit.Prompt(t, m, []byte(body))
	nb := len(ids) / 16
	want := nb
	if len(ids)%16 == 0 {
		want--
	}

	if hit, u := post(t, ts.URL, body); hit != 0 || u.PromptTokensDetails.CachedTokens != 0 {
		t.Fatalf("first adapter request: hit %d usage %+v", hit, u)
	}
	msgs := rec.all()
	b0, err := codec.Decode(codec.VLLM, msgs[0].Payload)
	if err != nil {
		t.Fatal(err)
	}
	ev := b0.Events[0]
	if ev.Type != codec.BlockStored || !ev.HasLoRAName || ev.LoRAName != "tenant-42" || !ev.HasLoRAID || ev.LoRAID != 1 {
		t.Fatalf("stored event lora_name %q (%v) lora_id %d (%v)", ev.LoRAName, ev.HasLoRAName, ev.LoRAID, ev.HasLoRAID)
	}
	for i, ks := range ev.ExtraKeys {
		if len(ks) != 1 || ks[0].Kind != codec.KeyString || ks[0].Str != "tenant-42" {
			t.Fatalf("block %d extra_keys %+v, want the adapter name first (and alone)", i, ks)
		}
	}
	ops := decodeAll(t, msgs)
	if len(ops) != 1 || len(ops[0].Stored) != nb {
		t.Fatalf("ops %+v", ops)
	}
	for i := range nb {
		if got, want := ops[0].Stored[i].LocalHash, blocks.HashTokens(ids[i*16:(i+1)*16], tenantSeed); got != want {
			t.Fatalf("block %d: %016x, want %016x (golden tenant-42 seed)", i, uint64(got), uint64(want))
		}
	}
	if hit, u := post(t, ts.URL, body); hit != want || u.PromptTokensDetails.CachedTokens != want*16 {
		t.Fatalf("adapter repeat: hit %d cached %d, want %d blocks", hit, u.PromptTokensDetails.CachedTokens, want)
	}
	if hit, _ := post(t, ts.URL, baseBody); hit != 0 {
		t.Fatalf("the base model hit %d of the adapter's blocks", hit)
	}
	if hit, _ := post(t, ts.URL, baseBody); hit != want {
		t.Fatalf("base repeat: hit %d, want %d", hit, want)
	}

	postStatus := func(path, body string) int {
		t.Helper()
		res, err := http.Post(ts.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	other := strings.Replace(body, `"model":"tenant-42"`, `"model":"sql"`, 1)
	if st := postStatus("/v1/chat/completions", other); st != http.StatusNotFound {
		t.Fatalf("an adapter not loaded: status %d", st)
	}
	if st := postStatus("/v1/load_lora_adapter", `{"lora_name":"sql","lora_path":"/adapters/sql"}`); st != http.StatusOK {
		t.Fatalf("load: %d", st)
	}
	if st := postStatus("/v1/load_lora_adapter", `{"lora_name":"sql","lora_path":"/adapters/sql"}`); st != http.StatusBadRequest {
		t.Fatalf("load twice: %d", st)
	}
	if hit, _ := post(t, ts.URL, other); hit != 0 {
		t.Fatalf("a second adapter hit %d of another's blocks", hit)
	}
	if as := s.Adapters(); len(as) != 2 || as[1].Name != "sql" {
		t.Fatalf("adapters after load %+v", as)
	}
	if st := postStatus("/v1/unload_lora_adapter", `{"lora_name":"tenant-42"}`); st != http.StatusOK {
		t.Fatalf("unload: %d", st)
	}
	if st := postStatus("/v1/chat/completions", body); st != http.StatusNotFound {
		t.Fatalf("an unloaded adapter: status %d", st)
	}
	if st := postStatus("/v1/unload_lora_adapter", `{"lora_name":"tenant-42"}`); st != http.StatusNotFound {
		t.Fatalf("unload twice: %d", st)
	}
}
