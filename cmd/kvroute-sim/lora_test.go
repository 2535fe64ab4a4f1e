package main

import (
	"testing"

	"go.uber.org/zap"

	"github.com/kvroute/kvroute/internal/sim"
)

// TestLoRAModulesFlag: -lora-modules is repeatable, takes name=path or vLLM's JSON form, and the
// adapters reach the worker's record; a value without a path is refused.
func TestLoRAModulesFlag(t *testing.T) {
	f, err := parseFlags([]string{"-model", "../../testdata/golden/qwen3vl-test-model", "-served-model-name", "qwen", "-lora-modules", "sql=/a/sql",
		"--lora-modules", `{"name":"chat","path":"/a/chat","base_model_name":"qwen"}`})
	if err != nil {
		t.Fatal(err)
	}
	want := []sim.LoRAModule{{Name: "sql", Path: "/a/sql"}, {Name: "chat", Path: "/a/chat"}}
	if len(f.loraModules) != 2 || f.loraModules[0] != want[0] || f.loraModules[1] != want[1] {
		t.Fatalf("modules %+v", f.loraModules)
	}
	cfg, pub, err := worker(f, nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	as := sim.New(cfg).Record("127.0.0.1:1").Adapters
	if len(as) != 2 || as[0].Name != "sql" || as[1].Name != "chat" || as[0].BaseModel != "qwen" {
		t.Fatalf("record adapters %+v", as)
	}
	if _, err := parseFlags([]string{"-lora-modules", "sql"}); err == nil {
		t.Error("-lora-modules sql (no path) accepted")
	}
}
