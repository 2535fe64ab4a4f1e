package tokenizer

import (
	"slices"
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"
)

// TestNFCLongCombiningRuns: x/text inserts U+034F after 30 non-starters
// (Stream-Safe Text Format); Hugging Face's NFC does not. The expected values
// were computed with CPython 3.11 unicodedata.normalize("NFC", s) (Unicode
// 14.0.0, no stream-safe limit; every code point here is older than 14.0).
func TestNFCLongCombiningRuns(t *testing.T) {
	cases := []struct{ in, want string }{
		{"a" + strings.Repeat("\u0301", 40),
			"\u00e1" + strings.Repeat("\u0301", 39)},
		{"e" + strings.Repeat("\u0323\u0301", 20),
			"\u1eb9" + strings.Repeat("\u0323", 19) + strings.Repeat("\u0301", 20)},
		{"e" + strings.Repeat("\u0302", 35) + "\u0323",
			"\u1ec7" + strings.Repeat("\u0302", 34)},
		{"\u1100\u1161" + strings.Repeat("\u0301", 35) + "\u11a8",
			"\uac00" + strings.Repeat("\u0301", 35) + "\u11a8"},
		{"x" + strings.Repeat("\u0316", 31) + strings.Repeat("\u0300", 31) + "y",
			"x" + strings.Repeat("\u0316", 31) + strings.Repeat("\u0300", 31) + "y"},
		{"A" + strings.Repeat("\u0300\u0316", 30) + "\u030a",
			"\u00c0" + strings.Repeat("\u0316", 30) + strings.Repeat("\u0300", 29) + "\u030a"},
		{"\u1ec7" + strings.Repeat("\u0323", 33),
			"\u1ec7" + strings.Repeat("\u0323", 33)},
		{"o" + strings.Repeat("\u0308", 3) + strings.Repeat("\u0301", 40) + " \u00e9",
			"\u00f6" + "\u0308\u0308" + strings.Repeat("\u0301", 40) + " " + "\u00e9"},
		{strings.Repeat("\u0344", 40),
			strings.Repeat("\u0308\u0301", 40)},
	}
	for _, c := range cases {
		if got := nfc(c.in); got != c.want {
			t.Errorf("nfc(%+q)\n got %+q\nwant %+q", c.in, got, c.want)
		}
		if strings.Contains(norm.NFC.String(c.in), cgj) == false {
			t.Errorf("%+q: x/text no longer inserts U+034F; the fullNFC fallback is untested", c.in)
		}
	}
	tok := loadTest(t)
	for _, c := range cases {
		if got := tok.Decode(tok.Encode(c.in)); got != c.want {
			t.Errorf("Decode(Encode(%+q)) = %+q, want %+q", c.in, got, c.want)
		}
	}
	// A run of 100 KB of combining marks stays O(n log n) and allocation-bounded.
	long := "a" + strings.Repeat("\u0316\u0301", 25_000)
	got := nfc(long)
	want := "\u00e1" + strings.Repeat("\u0316", 25_000) + strings.Repeat("\u0301", 24_999)
	if got != want {
		t.Errorf("nfc of a 100 KB mark run: %d bytes, want %d", len(got), len(want))
	}
}

// TestFullNFCMatchesXText checks fullNFC against x/text on every golden
// string (none has more than 30 non-starters in a row, so x/text's result is
// the plain NFC there) and on strings with invalid UTF-8.
func TestFullNFCMatchesXText(t *testing.T) {
	cases := append(corpusCases(t, "tokenizer_corpus.jsonl"), corpusCases(t, "tokenizer_unicode_skew.jsonl")...)
	extra := []string{"", "\xff", "a\xcc\x81", "e\u0301\xff\u0301", "\u1100\u1161\u11a8", "\uac00\u11a8",
		"\u0b47\u0b3e", "\u09c7\u09be", "\u0344", "\u2126", "\U0001d15e", "\u0f73", "\uc5b4\u11a8\u0301"}
	for _, s := range extra {
		cases = append(cases, goldenCase{Name: "extra", Text: s})
	}
	bad := 0
	for _, c := range cases {
		want := norm.NFC.String(c.Text)
		if strings.Count(want, cgj) != strings.Count(c.Text, cgj) || hasNFCNewer(c.Text) || hasNFCNewer(want) {
			continue // x/text inserted U+034F or used post-9.0 data: not comparable
		}
		if got := fullNFC(c.Text); got != want {
			bad++
			if bad <= 10 {
				t.Errorf("%s: fullNFC(%+q) = %+q, x/text %+q", c.Name, truncate(c.Text), truncate(got), truncate(want))
			}
		}
	}
	if !slices.Equal([]byte(fullNFC("\xff\xfe")), []byte("\xff\xfe")) {
		t.Error("fullNFC must keep invalid bytes")
	}
}

// TestNFCUnicode9 pins the Unicode 9.0.0 normalization data of Hugging Face's
// NFC (unicode-normalization-alignments 0.1.12). The expected values follow
// from that crate's algorithm and tables (no class, decomposition or
// composition for code points assigned later); x/text's Unicode 17 result is
// given for contrast.
func TestNFCUnicode9(t *testing.T) {
	if norm.Version != xtextNormVersion {
		t.Fatalf("x/text norm is %s, nfc9.go was generated for %s: rerun gen_nfc9.go", norm.Version, xtextNormVersion)
	}
	cases := []struct{ in, want, xtext string }{
		// U+1ABF (Unicode 13, class 220) is a starter for HF: no reordering,
		// and it blocks a+U+0301.
		{"a\u1abf\u0301", "a\u1abf\u0301", "\u00e1\u1abf"},
		// U+0898 (Unicode 14, class 230) before U+0316 (220): not reordered.
		{"a\u0898\u0316", "a\u0898\u0316", "a\u0316\u0898"},
		// Dives Akuru E + AA compose to U+11938 only since Unicode 13.
		{"\U00011935\U00011930", "\U00011935\U00011930", "\U00011938"},
		// Tulu-Tigalari (Unicode 16) composition.
		{"\U00011382\U000113C9", "\U00011382\U000113C9", "\U00011383"},
		// Old data still applies around them.
		{"e\u0301\u1abf", "\u00e9\u1abf", "\u00e9\u1abf"},
		{"\u1abfe\u0301", "\u1abf\u00e9", "\u1abf\u00e9"},
	}
	for _, c := range cases {
		if x := norm.NFC.String(c.in); x != c.xtext {
			t.Errorf("x/text NFC(%+q) = %+q, want %+q (test premise)", c.in, x, c.xtext)
		}
		if got := nfc(c.in); got != c.want {
			t.Errorf("nfc(%+q) = %+q, want %+q", c.in, got, c.want)
		}
	}
	for _, r := range []rune{0x1ABF, 0x0898, 0x11938, 0x11383, 0x105C9} {
		if !isNFCNewer(r) {
			t.Errorf("%U should be in nfcNewer", r)
		}
	}
	for _, r := range []rune{'a', 0x0301, 0x0316, 0x00e9, 0x11930, 0x1134B, 0xAC00} {
		if isNFCNewer(r) {
			t.Errorf("%U should not be in nfcNewer", r)
		}
	}
}

// TestNFCASCIIFastPath: isASCII finds a non-ASCII byte at every position of
// every length up to 80 (the 32-byte loop, the eight-byte loop and the tail), and nfc's ASCII
// shortcut gives what x/text and fullNFC give for all 128 ASCII bytes.
func TestNFCASCIIFastPath(t *testing.T) {
	for n := 0; n <= 80; n++ {
		b := []byte(strings.Repeat("a", n))
		if !isASCII(string(b)) {
			t.Fatalf("isASCII(%d x 'a') = false", n)
		}
		for i := 0; i < n; i++ {
			for _, c := range []byte{0x80, 0xC3, 0xFF} {
				b[i] = c
				if isASCII(string(b)) {
					t.Fatalf("isASCII: byte %#x at %d of %d not seen", c, i, n)
				}
				b[i] = 'a'
			}
		}
	}
	var all []byte
	for c := 0; c < 0x80; c++ {
		all = append(all, byte(c))
	}
	s := string(all) + string(all[1:])
	if got := nfc(s); got != s || norm.NFC.String(s) != s || fullNFC(s) != s {
		t.Errorf("ASCII is not its own NFC form: nfc %q, x/text %q, fullNFC %q", got, norm.NFC.String(s), fullNFC(s))
	}
	// One non-ASCII byte anywhere still goes through normalization.
	if got, want := nfc(s+"e\u0301"), s+"\u00e9"; got != want {
		t.Errorf("nfc(ASCII + e + U+0301) = %+q, want %+q", got, want)
	}
}

// BenchmarkNFCASCII: nfc of a 440 kB ASCII document (the harness's cold111k shape: common
// words, a newline every 17 words) with the ASCII shortcut ("ascii") and through the path nfc
// took before it ("xtext": x/text's quick check, then the nfcNewer scan).
func BenchmarkNFCASCII(b *testing.B) {
	words := []string{"the", "route", "cache", "worker", "block", "token", "prefill", "of", "and", "model"}
	var sb strings.Builder
	for i := 0; sb.Len() < 440_000; i++ {
		sb.WriteString(words[(i*7+i/3)%len(words)])
		if i%17 == 16 {
			sb.WriteString(".\n")
		} else {
			sb.WriteByte(' ')
		}
	}
	s := sb.String()
	b.Run("xtext", func(b *testing.B) {
		b.SetBytes(int64(len(s)))
		for b.Loop() {
			if out := norm.NFC.String(s); out != s || hasNFCNewer(s) {
				b.Fatal("ASCII changed")
			}
		}
	})
	b.Run("ascii", func(b *testing.B) {
		b.SetBytes(int64(len(s)))
		for b.Loop() {
			if nfc(s) != s {
				b.Fatal("ASCII changed")
			}
		}
	})
}
