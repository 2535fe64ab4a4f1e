package bridge

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// maxMetricsBytes bounds the /metrics page read by ProbeBlockSize.
const maxMetricsBytes = 32 << 20

// ErrNoBlockSize is returned when the metrics page has no cache_config_info block_size label.
var ErrNoBlockSize = errors.New("no block_size in the engine's metrics")

// ProbeBlockSize reads the engine's KV block size from its Prometheus page at url: the block_size
// label of vLLM's info gauge, e.g. vllm:cache_config_info{block_size="16",...} 1.0 (vLLM
// v1/metrics/loggers.py logs CacheConfig.metrics_info() this way). Any metric named
// <prefix>:cache_config_info is accepted.
func ProbeBlockSize(ctx context.Context, client *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, fmt.Errorf("probing block size: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("probing block size: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("probing block size: GET %s: status %d", url, resp.StatusCode)
	}
	return parseBlockSize(io.LimitReader(resp.Body, maxMetricsBytes))
}

func parseBlockSize(r io.Reader) (int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		brace := strings.IndexByte(line, '{')
		if brace < 0 || !strings.HasSuffix(line[:brace], ":cache_config_info") {
			continue
		}
		labels := line[brace+1:]
		i := 0
		for {
			j := strings.Index(labels[i:], `block_size="`)
			if j < 0 {
				break
			}
			at := i + j
			if at == 0 || labels[at-1] == ',' || labels[at-1] == ' ' {
				v := labels[at+len(`block_size="`):]
				end := strings.IndexByte(v, '"')
				if end < 0 {
					break
				}
				n, err := strconv.Atoi(v[:end])
				if err != nil || n <= 0 {
					return 0, fmt.Errorf("probing block size: label block_size=%q is not a positive integer", v[:end])
				}
				return n, nil
			}
			i = at + 1
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("probing block size: reading metrics: %w", err)
	}
	return 0, ErrNoBlockSize
}
