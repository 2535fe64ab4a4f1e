package chat

import (
	"strings"
	"testing"
)

// BenchmarkString decodes (parseJSON) one 8 kB string literal of each shape the decoder treats apart:
// English text with a \n every 85 bytes (chat texts), CJK text (a non-ASCII run), invalid UTF-8
// bytes (each one a U+FFFD), \u escapes, and plain ASCII without escapes.
func BenchmarkString(b *testing.B) {
	line := strings.Repeat("the of and to in is was for on that with as by at from his her ", 2)[:83] + `\n`
	for _, c := range []struct{ name, piece string }{
		{"newlines", line}, {"cjk", "中文字"}, {"invalid", "\xcd"}, {"u-escapes", `\u00e9`}, {"plain", "plain text "},
	} {
		lit := []byte(`"` + strings.Repeat(c.piece, 8192/len(c.piece)) + `"`)
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(lit)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := parseJSON(lit, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
