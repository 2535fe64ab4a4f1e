package layout_test

import (
	"os"
	"testing"

	"github.com/kvroute/kvroute/routing/layout"
)

// TestExampleContractFileIsHubContract: the contract file the README's examples use is DESIGN's
// example contract (same digest) and valid.
func TestExampleContractFileIsHubContract(t *testing.T) {
	b, err := os.ReadFile("../../docs/examples/contract-vllm-hub.json")
	if err != nil {
		t.Fatal(err)
	}
	file, err := layout.ParseContract(b)
	if err != nil {
		t.Fatal(err)
	}
	hub, err := layout.ParseContract([]byte(layout.HubContractJSON))
	if err != nil {
		t.Fatal(err)
	}
	if err := file.Validate(); err != nil {
		t.Fatal(err)
	}
	df, _ := file.Digest()
	dh, _ := hub.Digest()
	if df != dh || df == "" {
		t.Fatalf("digest %s, hub %s", df, dh)
	}
}
