package chat

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// checkUnquote compares the decoder's string with encoding/json's Unmarshal for one literal.
func checkUnquote(t *testing.T, lit string) {
	t.Helper()
	var want string
	wantErr := json.Unmarshal([]byte(lit), &want)
	d := &decoder{src: []byte(lit)}
	got, err := d.string()
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%q: error %v, encoding/json %v", lit, err, wantErr)
	}
	if err == nil && got != want {
		t.Fatalf("%q: got %q, encoding/json %q", lit, got, want)
	}
}

// TestUnquoteMatchesEncodingJSON checks the escape decoder against encoding/json on the escape
// classes (surrogate pairs, lone and reversed surrogates, invalid UTF-8, bad escapes) and on
// 20 000 random literals built from those pieces.
func TestUnquoteMatchesEncodingJSON(t *testing.T) {
	fixed := []string{
		`"plain"`, `"a\nb"`, `"\"\\\/\b\f\n\r\t"`, `"\u0041\u00e9\u4e2d"`, `"\ud83d\ude00"`,
		`"\ud83d"`, `"\ude00"`, `"\ud83d\u0041"`, `"\ud83dx"`, `"\ud83d\ud83d\ude00"`, `"\ude00\ud83d"`,
		`"\uD83D\uDE00"`, `"\u00"`, `"\uzzzz"`, `"\x"`, `"\"`, "\"a\xffb\"", "\"\xc3\"", "\"\xed\xa0\x80\"",
		"\"é\\n\xf0\x9f\x98\x80\"", `"\u0000"`, "\"\\\x01\"", "\"\\\xc3\xa9\"", `"\ud83d\u"`, `"\ud83d\uzzzz"`,
	}
	for _, lit := range fixed {
		checkUnquote(t, lit)
	}
	pieces := []string{"a", "Z", " ", "é", "中", "\xf0\x9f\x98\x80", "\xff", "\xc3", "\xed\xa0\x80", `\n`, `\t`, `\"`,
		`\\`, `\/`, `\b`, `\f`, `\r`, `\u0041`, `\u00E9`, `\ud83d`, `\ude00`, `\uD83D`, `\uDFFF`, `\u`, `\q`, `\u12`}
	r := rand.New(rand.NewPCG(14, 14))
	for i := 0; i < 20000; i++ {
		lit := `"`
		for k := r.IntN(8); k >= 0; k-- {
			lit += pieces[r.IntN(len(pieces))]
		}
		checkUnquote(t, lit+`"`)
	}
}

// FuzzUnquote compares the decoder's strings with encoding/json on arbitrary literal bodies.
func FuzzUnquote(f *testing.F) {
	f.Add([]byte(`a\nb\ud83d\ude00`))
	f.Add([]byte("\xff\\u00e9"))
	f.Fuzz(func(t *testing.T, body []byte) {
		lit := `"` + string(body) + `"`
		if d := (&decoder{src: []byte(lit)}); func() bool { _, err := d.string(); return err == nil && d.pos != len(lit) }() {
			return // the body closes the literal early: not one string
		}
		checkUnquote(t, lit)
	})
}

// BenchmarkParseRequestLong parses a 50-message chat body of about 400 kB whose texts contain
// escapes (newlines, quotes), the shape of a long conversation.
func BenchmarkParseRequestLong(b *testing.B) {
	msgs := make([]map[string]string, 50)
	r := rand.New(rand.NewPCG(1, 2))
	words := []string{"route", "cache", "the", "block", "worker", "token", "\"quoted\"", "line\n", "é", "中文"}
	for i := range msgs {
		var s []byte
		for len(s) < 8000 {
			s = append(s, words[r.IntN(len(words))]...)
			s = append(s, ' ')
		}
		msgs[i] = map[string]string{"role": []string{"user", "assistant"}[i%2], "content": string(s)}
	}
	body, _ := json.Marshal(map[string]any{"model": "m", "messages": msgs})
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSkipPlainMatchesTable checks the eight-byte scan against the byte table: every byte value
// at every position of a 24-byte run, from every start offset.
func TestSkipPlainMatchesTable(t *testing.T) {
	slow := func(src []byte, i int) int {
		for i < len(src) && plainStringByte[src[i]] {
			i++
		}
		return i
	}
	src := []byte("abcdefghijklmnopqrstuvwx")
	for c := 0; c < 256; c++ {
		for p := range src {
			old := src[p]
			src[p] = byte(c)
			for start := 0; start <= len(src); start++ {
				if got, want := skipPlain(src, start), slow(src, start); got != want {
					t.Fatalf("byte %#x at %d, start %d: skipPlain %d, want %d", c, p, start, got, want)
				}
			}
			src[p] = old
		}
	}
}

// TestSkipPlainTwoSpecialBytes checks the scan when one word holds two bytes that are not
// plain, or a plain byte next to one (the SWAR borrows then flag bytes above the first match;
// skipPlain answers with the lowest flag): pairs of boundary byte values at every two
// positions of a 16-byte run, from every start offset.
func TestSkipPlainTwoSpecialBytes(t *testing.T) {
	slow := func(src []byte, i int) int {
		for i < len(src) && plainStringByte[src[i]] {
			i++
		}
		return i
	}
	vals := []byte{0x00, 0x01, 0x1e, 0x1f, 0x20, 0x21, '"', '"' + 1, '\\' - 1, '\\', '\\' + 1, 0x7e, 0x7f, 0x80, 0x81, 0x9f, 0xa0, 0xa1, 0xdc, 0xfe, 0xff, 'a'}
	src := []byte("abcdefghijklmnop")
	for _, c1 := range vals {
		for _, c2 := range vals {
			for p1 := range src {
				for p2 := p1 + 1; p2 < len(src); p2++ {
					src[p1], src[p2] = c1, c2
					for start := 0; start <= len(src); start++ {
						if got, want := skipPlain(src, start), slow(src, start); got != want {
							t.Fatalf("bytes %#x at %d and %#x at %d, start %d: skipPlain %d, want %d", c1, p1, c2, p2, start, got, want)
						}
					}
					copy(src, "abcdefghijklmnop")
				}
			}
		}
	}
}

// TestUnquoteLongLiterals checks long literals (up to 200 pieces: runs longer than a word,
// escapes and invalid bytes inside and across eight-byte words) against encoding/json.
func TestUnquoteLongLiterals(t *testing.T) {
	pieces := []string{"abcdefghij", "a", " ", "é", "中", "\xf0\x9f\x98\x80", "\xff", "\xc3", `\n`, `\"`, `\\`,
		`\u00E9`, `\ud83d\ude00`, `\ud83d`, "\x7f", "~", `\/`}
	r := rand.New(rand.NewPCG(14, 15))
	for i := 0; i < 5000; i++ {
		lit := `"`
		for k := r.IntN(200); k >= 0; k-- {
			lit += pieces[r.IntN(len(pieces))]
		}
		checkUnquote(t, lit+`"`)
	}
}
