package tokenizer

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"

	"golang.org/x/text/unicode/norm"

	"github.com/kvroute/kvroute/internal/goldens"
)

const (
	goldenDir     = "../../testdata/golden/"
	testModelPath = goldenDir + "qwen3vl-test-model/tokenizer.json"
)

var (
	testTokOnce sync.Once
	testTok     *Tokenizer
	testTokErr  error
)

// loadTest loads the Qwen3 test tokenizer once per test binary.
func loadTest(tb testing.TB) *Tokenizer {
	tb.Helper()
	testTokOnce.Do(func() { testTok, testTokErr = Load(testModelPath) })
	if testTokErr != nil {
		tb.Fatalf("Load: %v", testTokErr)
	}
	return testTok
}

// goldenCase is one text and its Hugging Face ids.
type goldenCase struct {
	Name string
	Text string
	IDs  []uint32
}

// corpusCases reads a {id, cat, text, ids} file (tokenizer_corpus.jsonl,
// tokenizer_unicode_skew.jsonl).
func corpusCases(tb testing.TB, name string) []goldenCase {
	tb.Helper()
	var out []goldenCase
	goldens.EachLine(tb, goldenDir+name, func(line []byte) {
		var r struct {
			ID   int      `json:"id"`
			Cat  string   `json:"cat"`
			Text string   `json:"text"`
			IDs  []uint32 `json:"ids"`
		}
		if err := json.Unmarshal(line, &r); err != nil {
			tb.Fatalf("decoding %s: %v", name, err)
		}
		out = append(out, goldenCase{Name: fmt.Sprintf("%d/%s", r.ID, r.Cat), Text: r.Text, IDs: r.IDs})
	})
	return out
}

// tokensCases reads tokens.jsonl: every record's ids are HF's encode of its
// whole text in one call (kinds chat_prompt, timestamp, special, fragment,
// expanded_prompt; ids_spliced of expanded prompts is not a single encode).
func tokensCases(tb testing.TB) []goldenCase {
	tb.Helper()
	var out []goldenCase
	goldens.EachLine(tb, goldenDir+"tokens.jsonl", func(line []byte) {
		var r struct {
			ID   string   `json:"id"`
			Kind string   `json:"kind"`
			Text string   `json:"text"`
			IDs  []uint32 `json:"ids"`
		}
		if err := json.Unmarshal(line, &r); err != nil {
			tb.Fatalf("decoding tokens.jsonl: %v", err)
		}
		out = append(out, goldenCase{Name: r.Kind + "/" + r.ID, Text: r.Text, IDs: r.IDs})
	})
	return out
}

// chatCases reads chat_cases_qwen3.jsonl: rendered prompt → ids.
func chatCases(tb testing.TB) []goldenCase {
	tb.Helper()
	var out []goldenCase
	goldens.EachLine(tb, goldenDir+"chat_cases_qwen3.jsonl", func(line []byte) {
		var r struct {
			ID       json.RawMessage `json:"id"`
			Template string          `json:"template"`
			Rendered string          `json:"rendered"`
			IDs      []uint32        `json:"ids"`
		}
		if err := json.Unmarshal(line, &r); err != nil {
			tb.Fatalf("decoding chat_cases_qwen3.jsonl: %v", err)
		}
		out = append(out, goldenCase{Name: r.Template + "/" + string(r.ID), Text: r.Rendered, IDs: r.IDs})
	})
	return out
}

// checkCases encodes every case and reports mismatches (at most 20 in
// detail) and the matched count.
func checkCases(t *testing.T, tok *Tokenizer, cases []goldenCase) {
	t.Helper()
	if len(cases) == 0 {
		t.Fatal("no golden cases")
	}
	bad := 0
	for _, c := range cases {
		got := tok.Encode(c.Text)
		if slices.Equal(got, c.IDs) {
			continue
		}
		bad++
		if bad <= 20 {
			t.Errorf("%s: Encode(%q)\n got %v\nwant %v", c.Name, truncate(c.Text), truncIDs(got), truncIDs(c.IDs))
		}
	}
	t.Logf("matched %d/%d", len(cases)-bad, len(cases))
	if bad > 0 {
		t.Errorf("%d of %d cases differ", bad, len(cases))
	}
}

func truncate(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

func truncIDs(ids []uint32) []uint32 {
	if len(ids) > 40 {
		return ids[:40]
	}
	return ids
}

func TestGoldenCorpus(t *testing.T) {
	checkCases(t, loadTest(t), corpusCases(t, "tokenizer_corpus.jsonl"))
}

func TestGoldenUnicodeSkew(t *testing.T) {
	checkCases(t, loadTest(t), corpusCases(t, "tokenizer_unicode_skew.jsonl"))
}

func TestGoldenTokens(t *testing.T) {
	checkCases(t, loadTest(t), tokensCases(t))
}

func TestGoldenChatCases(t *testing.T) {
	checkCases(t, loadTest(t), chatCases(t))
}

func read1MB(tb testing.TB) (string, []uint32) {
	tb.Helper()
	text, err := os.ReadFile(goldenDir + "tokenizer_1mb.txt")
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := os.ReadFile(goldenDir + "tokenizer_1mb_ids.json")
	if err != nil {
		tb.Fatal(err)
	}
	var ids []uint32
	if err := json.Unmarshal(raw, &ids); err != nil {
		tb.Fatal(err)
	}
	return string(text), ids
}

func TestGolden1MB(t *testing.T) {
	text, want := read1MB(t)
	got := loadTest(t).Encode(text)
	if len(want) != 376840 {
		t.Fatalf("golden has %d ids, README says 376840", len(want))
	}
	if !slices.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("1 MB text: %d ids, want %d; first difference at id %d", len(got), len(want), i)
	}
}

// nfcSegments is what Decode(Encode(s)) must return: NFC applied to the text
// between added tokens, the added tokens verbatim.
func nfcSegments(tok *Tokenizer, s string) string {
	out := ""
	for {
		start, end, _ := tok.added.find(s)
		if start < 0 {
			return out + norm.NFC.String(s)
		}
		out += norm.NFC.String(s[:start]) + s[start:end]
		s = s[end:]
	}
}

func TestDecodeGolden(t *testing.T) {
	tok := loadTest(t)
	cases := append(corpusCases(t, "tokenizer_corpus.jsonl"), corpusCases(t, "tokenizer_unicode_skew.jsonl")...)
	cases = append(cases, tokensCases(t)...)
	bad := 0
	for _, c := range cases {
		if got, want := tok.Decode(c.IDs), nfcSegments(tok, c.Text); got != want {
			bad++
			if bad <= 10 {
				t.Errorf("%s: Decode = %q, want %q", c.Name, truncate(got), truncate(want))
			}
		}
	}
	t.Logf("decoded %d/%d", len(cases)-bad, len(cases))
}

func TestConcurrentEncode(t *testing.T) {
	tok := loadTest(t)
	cases := corpusCases(t, "tokenizer_corpus.jsonl")
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := g; i < len(cases); i += 2 {
				if len(cases[i].Text) > 4096 {
					continue
				}
				if got := tok.Encode(cases[i].Text); !slices.Equal(got, cases[i].IDs) {
					select {
					case errs <- cases[i].Name:
					default:
					}
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for name := range errs {
		t.Errorf("concurrent Encode differs on %s", name)
	}
}
