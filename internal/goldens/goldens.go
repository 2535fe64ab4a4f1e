// Package goldens reads the golden vector files of testdata/golden for the tests of several
// packages. Only tests import it.
package goldens

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"
)

// TokenIDs returns the `ids` of the record with the given id in the tokens.jsonl file at
// path (testdata/golden/tokens.jsonl), failing the test when there is none.
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
