package tokenizer

import (
	"strings"
	"testing"
)

// BenchmarkAddedTokensFind splits the 1 MB test text (which holds many '<') at the Qwen test
// tokenizer's added tokens, as Encode does first: one op is the whole text.
func BenchmarkAddedTokensFind(b *testing.B) {
	tok := loadTest(b)
	text, _ := read1MB(b)
	text = strings.ToValidUTF8(text, "")
	b.SetBytes(int64(len(text)))
	found := 0
	for b.Loop() {
		found = 0
		for s := text; ; {
			start, end, _ := tok.added.find(s)
			if start < 0 {
				break
			}
			found++
			s = s[end:]
		}
	}
	b.ReportMetric(float64(strings.Count(text, "<")), "lt/op")
	b.ReportMetric(float64(found), "found/op")
}
