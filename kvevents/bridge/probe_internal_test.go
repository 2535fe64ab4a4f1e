package bridge

import (
	"errors"
	"strings"
	"testing"
)

func TestParseBlockSize(t *testing.T) {
	page := `# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="32",cache_dtype="auto",enable_prefix_caching="True",kv_block_size="7"} 1.0
`
	if n, err := parseBlockSize(strings.NewReader(page)); err != nil || n != 32 {
		t.Fatalf("parseBlockSize = %d, %v", n, err)
	}
	other := `vllm:cache_config_info{cache_dtype="auto",kv_block_size="7",block_size="16"} 1.0`
	if n, err := parseBlockSize(strings.NewReader(other)); err != nil || n != 16 {
		t.Fatalf("block_size after kv_block_size: %d, %v", n, err)
	}
	for _, bad := range []string{"", "vllm:num_requests_running 0\n", `vllm:cache_config_info{kv_block_size="8"} 1`} {
		if _, err := parseBlockSize(strings.NewReader(bad)); !errors.Is(err, ErrNoBlockSize) {
			t.Errorf("parseBlockSize(%q): err = %v, want ErrNoBlockSize", bad, err)
		}
	}
	if _, err := parseBlockSize(strings.NewReader(`vllm:cache_config_info{block_size="0"} 1`)); err == nil {
		t.Error("block_size 0 accepted")
	}
}
