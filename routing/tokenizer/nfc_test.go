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
		if strings.Count(want, cgj) != strings.Count(c.Text, cgj) {
			continue // x/text inserted U+034F: not comparable
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
