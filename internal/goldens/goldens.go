// Package goldens reads the golden vector files of testdata/golden for the tests of several
// packages. Only tests import it.
package goldens

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"
)

// maxLine bounds one JSONL line (the largest golden line, in tokenizer_corpus.jsonl, is about
// 500 KB).
const maxLine = 64 << 20

// EachLine calls fn with every line of the JSONL file at path, in file order, failing the test
// when the file cannot be opened or read. fn must not keep line after it returns.
func EachLine(tb testing.TB, path string, fn func(line []byte)) {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatalf("opening %s: %v", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), maxLine)
	for sc.Scan() {
		fn(sc.Bytes())
	}
	if err := sc.Err(); err != nil {
		tb.Fatalf("reading %s: %v", path, err)
	}
}

// Lines returns copies of the non-empty lines of the JSONL file at path, in file order.
func Lines(tb testing.TB, path string) [][]byte {
	tb.Helper()
	var out [][]byte
	EachLine(tb, path, func(line []byte) {
		if len(line) > 0 {
			out = append(out, append([]byte(nil), line...))
		}
	})
	return out
}

// Records decodes every non-empty line of the JSONL file at path into a new T, in file order,
// failing the test on a line that does not decode.
func Records[T any](tb testing.TB, path string) []T {
	tb.Helper()
	var out []T
	n := 0
	EachLine(tb, path, func(line []byte) {
		n++
		if len(line) == 0 {
			return
		}
		var v T
		if err := json.Unmarshal(line, &v); err != nil {
			tb.Fatalf("decoding %s line %d: %v", path, n, err)
		}
		out = append(out, v)
	})
	return out
}

// NormalizeRecord is one record of normalize.jsonl: a worker-visible token sequence with its media
// spans (identities as decimal u64 strings), and the request-side block hashes and routing tokens
// (DESIGN.md §5).
type NormalizeRecord struct {
	ID     string `json:"id"`
	Inputs struct {
		BlockSize int      `json:"block_size"`
		Tokens    []uint32 `json:"tokens"`
		Spans     []struct {
			Start    int    `json:"start"`
			End      int    `json:"end"`
			Identity string `json:"identity"`
			Kind     string `json:"kind"`
		} `json:"spans"`
		ImagePad  uint32  `json:"image_pad"`
		VideoPad  uint32  `json:"video_pad"`
		LoRAName  *string `json:"lora_name"`
		CacheSalt *string `json:"cache_salt"`
	} `json:"inputs"`
	Outputs struct {
		Seed   string `json:"seed"`
		Blocks []struct {
			Index     int    `json:"index"`
			Kind      string `json:"kind"`
			LocalHash string `json:"local_hash"`
			NRuns     int    `json:"n_runs"`
			NObjects  int    `json:"n_objects"`
			Spans     []int  `json:"spans"`
			SeqHash   string `json:"seq_hash"`
		} `json:"blocks"`
		RoutingTokens []uint32 `json:"routing_tokens"`
	} `json:"outputs"`
}

// QwenChatCase is one record of chat_cases_qwen3.jsonl: a template input rendered by the Qwen3
// text template ("qwen3") or the Qwen3-VL one ("qwen3vl"), and the ids of the rendered prompt.
type QwenChatCase struct {
	ID                  int             `json:"id"`
	Template            string          `json:"template"`
	Messages            json.RawMessage `json:"messages"`
	Tools               json.RawMessage `json:"tools"`
	AddGenerationPrompt bool            `json:"add_generation_prompt"`
	Kwargs              json.RawMessage `json:"kwargs"`
	Rendered            string          `json:"rendered"`
	IDs                 []uint32        `json:"ids"`
}

// TokenIDs returns the `ids` of the record with the given id in the tokens.jsonl file at
// path (testdata/golden/tokens.jsonl), failing the test when there is none. It stops reading at
// the first match.
func TokenIDs(tb testing.TB, path, id string) []uint32 {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var rec struct {
			ID  string   `json:"id"`
			IDs []uint32 `json:"ids"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			tb.Fatal(err)
		}
		if rec.ID == id {
			return rec.IDs
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	tb.Fatalf("no record %s in %s", id, path)
	return nil
}
