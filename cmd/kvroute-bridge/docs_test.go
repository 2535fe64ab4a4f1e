package main

import (
	"os"
	"regexp"
	"testing"

	"github.com/kvroute/kvroute/routing/layout"
)

// TestDocsContracts checks that the video contracts shown in the deployment guides parse and validate
// with kvroute's own contract code, and that the guides show different digests (vLLM vs SGLang).
func TestDocsContracts(t *testing.T) {
	block := regexp.MustCompile("(?s)```json\n(\\{\"schema\": \"kvroute.video_contract/v1\".*?)\n```")
	digests := map[string]string{}
	for _, doc := range []string{"../../docs/deploy-vllm.md", "../../docs/deploy-sglang.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		m := block.FindAllSubmatch(b, -1)
		if len(m) != 1 {
			t.Fatalf("%s: %d contract blocks, want 1", doc, len(m))
		}
		c, err := layout.ParseContract(m[0][1])
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		d, err := c.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests[doc] = d
	}
	if digests["../../docs/deploy-vllm.md"] == digests["../../docs/deploy-sglang.md"] {
		t.Error("the vLLM and SGLang contracts have the same digest")
	}
}
