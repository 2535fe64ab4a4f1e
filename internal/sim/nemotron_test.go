package sim

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/routing/layout"
)

// TestFrontendNemotronDefaults checks that a Nemotron 3 Nano Omni folder without -contract gets the
// nemotron_omni contract, and that image parts, which the simulator cannot lay out for that
// adapter, are refused as request errors.
func TestFrontendNemotronDefaults(t *testing.T) {
	f, err := NewFrontend(&FrontendConfig{ModelDir: "../../testdata/nemotron-test-model"})
	if err != nil {
		t.Fatal(err)
	}
	if c := f.Contract(); c.Adapter != layout.AdapterNemotronOmni || string(f.ContractJSON()) != layout.NemotronContractJSON {
		t.Fatalf("contract %+v", c)
	}
	body := `{"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://127.0.0.1:9/x.png"}}]}]}`
	_, err = f.Prepare(context.Background(), []byte(body))
	if err == nil || !strings.Contains(err.Error(), "does not lay out images for adapter nemotron_omni") {
		t.Errorf("image request: %v", err)
	}
	// A text request is tokenized with the folder's template and tokenizer.
	p, err := f.Prepare(context.Background(), []byte(`{"model": "m", "messages": [{"role": "user", "content": "Describe the clip"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := f.Model().Tokenizer.Encode("<|im_start|>user\nDescribe the clip<|im_end|>\n<|im_start|>assistant\n")
	if !slices.Equal(p.Tokens, want) || p.Tokens[0] != 10 {
		t.Errorf("tokens %v, want %v", p.Tokens, want)
	}
}
