package testkit

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"
)

// SpecialTokenVectors reads the oracle vectors of testdata/special_tokens/vectors.jsonl (at path;
// Hugging Face tokenizers 0.23.2 with transformers' post-processor rules, see its SOURCE.md) for
// one model folder and reading: text → add_special_tokens → ids. It fails the test when the file
// has none for them.
func SpecialTokenVectors(tb testing.TB, path, folder, reading string) map[string]map[bool][]uint32 {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	out := map[string]map[bool][]uint32{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var v struct {
			Model, Reading, Text string
			AddST                bool `json:"add_special_tokens"`
			IDs                  []uint32
		}
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			tb.Fatal(err)
		}
		if v.Model == folder && v.Reading == reading {
			if out[v.Text] == nil {
				out[v.Text] = map[bool][]uint32{}
			}
			out[v.Text][v.AddST] = v.IDs
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	if len(out) == 0 {
		tb.Fatalf("no special-token vectors for %s %s in %s", folder, reading, path)
	}
	return out
}
