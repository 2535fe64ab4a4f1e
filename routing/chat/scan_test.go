package chat

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// slowSkipPlain is skipPlain byte by byte, from the table.
func slowSkipPlain(src []byte, i int) int {
	for i < len(src) && plainStringByte[src[i]] {
		i++
	}
	return i
}

// slowCopyRun is copyRun byte by byte: plain bytes are copied, two-byte escapes decoded.
func slowCopyRun(dst, src []byte, i int) ([]byte, int) {
	for i < len(src) {
		switch {
		case plainStringByte[src[i]]:
			dst, i = append(dst, src[i]), i+1
		case src[i] == '\\' && i+1 < len(src) && strings.IndexByte(`"\\/bfnrt`, src[i+1]) >= 0:
			var s string
			if err := json.Unmarshal([]byte(`"`+string(src[i:i+2])+`"`), &s); err != nil {
				panic(err)
			}
			dst, i = append(dst, s...), i+2
		default:
			return dst, i
		}
	}
	return dst, i
}

// checkScanners compares skipPlain with the table, and copyRun (onto an empty scratch, and onto
// a scratch whose capacity is nearly used up, so that it grows mid-run) with slowCopyRun, from
// every start offset of src.
func checkScanners(t *testing.T, src []byte) {
	t.Helper()
	for start := 0; start <= len(src); start++ {
		want := slowSkipPlain(src, start)
		if got := skipPlain(src, start); got != want {
			t.Fatalf("%q, start %d: skipPlain %d, want %d", src, start, got, want)
		}
		for _, dst := range [][]byte{nil, make([]byte, 5, 7)} {
			wantOut, wantEnd := slowCopyRun(slices.Clone(dst), src, start)
			out, end := copyRun(dst, src, start)
			if end != wantEnd || string(out) != string(wantOut) {
				t.Fatalf("%q, start %d, scratch cap %d: copyRun gave %q ending at %d, want %q ending at %d",
					src, start, cap(dst), out, end, wantOut, wantEnd)
			}
		}
	}
}

// TestScannersEveryByteEveryPosition puts each of the 256 byte values at each position of a
// 72-byte run (two 32-byte blocks and a tail of one word and no bytes, or of bytes only,
// depending on the start) and checks skipPlain and copyRun from every start offset.
func TestScannersEveryByteEveryPosition(t *testing.T) {
	src := []byte(strings.Repeat("abcdefgh", 9))
	for c := 0; c < 256; c++ {
		for p := range src {
			src[p] = byte(c)
			checkScanners(t, src)
			src[p] = "abcdefgh"[p%8]
		}
	}
}

// TestScannersEscapeEveryPosition puts a backslash followed by each of the 256 byte values at
// each position of a 72-byte run: a two-byte escape is decoded and the run goes on, anything
// else ends it.
func TestScannersEscapeEveryPosition(t *testing.T) {
	src := []byte(strings.Repeat("ABCDEFGH", 9))
	for c := 0; c < 256; c++ {
		for p := 0; p+1 < len(src); p++ {
			src[p], src[p+1] = '\\', byte(c)
			checkScanners(t, src)
			copy(src[p:p+2], strings.Repeat("ABCDEFGH", 9)[p:p+2])
		}
	}
}

// TestScannersTwoBytesInABlock puts two boundary byte values in one 32-byte block, in any two
// words (or the same word) of it: the block test sees both, and the run must end at the first.
func TestScannersTwoBytesInABlock(t *testing.T) {
	vals := []byte{0x00, 0x1f, 0x20, 0x21, '"', '"' + 1, '\\' - 1, '\\', 'n', 'u', 0x7f, 0x80, 0xa2, 0xdc, 0xff}
	src := []byte(strings.Repeat("abcdefgh", 5))
	for _, c1 := range vals {
		for _, c2 := range vals {
			for p1 := 0; p1 < 32; p1 += 3 {
				for p2 := p1 + 1; p2 < 40; p2 += 5 {
					src[p1], src[p2] = c1, c2
					checkScanners(t, src)
					copy(src, strings.Repeat("abcdefgh", 5))
				}
			}
		}
	}
}

// checkStringAt decodes the literal lit placed at byte offset off of a body (after off spaces,
// before a comma) and compares the value, the error class and the end position with
// encoding/json.
func checkStringAt(t *testing.T, lit string, off int) {
	t.Helper()
	var want string
	wantErr := json.Unmarshal([]byte(lit), &want)
	src := []byte(strings.Repeat(" ", off) + lit + ",")
	d := &decoder{src: src, pos: off}
	got, err := d.string()
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%q at %d: error %v, encoding/json %v", lit, off, err, wantErr)
	}
	if err != nil {
		return
	}
	if got != want {
		t.Fatalf("%q at %d: got %q, encoding/json %q", lit, off, got, want)
	}
	if d.pos != off+len(lit) {
		t.Fatalf("%q at %d: ends at %d, want %d", lit, off, d.pos, off+len(lit))
	}
}

// stringPieces are the pieces that end a plain run: every escape class, valid and invalid
// UTF-8 of each length (whole, truncated, a surrogate's encoding), and raw control bytes.
var stringPieces = []string{
	`\n`, `\"`, `\\`, `\/`, `\b`, `\f`, `\r`, `\t`, `\u0041`, `\u00e9`, `\u4E2D`, `\ud83d\ude00`, `\ud83d`,
	`\ude00`, `\ud83d\u0041`, `\ud83dx`, `\u0000`, `\uzzzz`, `\u12`, `\x`, "\\\x01", "\\\xc3\xa9",
	"é", "中", "\xf0\x9f\x98\x80", "\xff", "\xc3", "\xe4\xb8", "\xf0\x9f\x98", "\xed\xa0\x80", "\xef\xbf\xbd",
	"\x01", "\x1f", "\x7f", "\t", "é中\xf0\x9f\x98\x80\xff",
}

// TestStringPiecesAtWordEdges puts each piece after a plain run of every length from 0 to 70
// (so it starts at every position of an eight-byte word and of a 32-byte block) and before a
// plain tail of lengths around the word and block sizes, with the literal at several offsets
// of the body, and compares with encoding/json.
func TestStringPiecesAtWordEdges(t *testing.T) {
	plain := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 4)
	for _, piece := range stringPieces {
		for run := 0; run <= 70; run++ {
			for _, tail := range []int{0, 1, 7, 8, 9, 31, 32, 33} {
				lit := `"` + plain[:run] + piece + plain[:tail] + `"`
				for _, off := range []int{0, 3} {
					checkStringAt(t, lit, off)
				}
			}
		}
	}
}

// TestStringPiecesRepeated decodes texts with a piece every n plain bytes (n from 0 to 40),
// as long chat texts have a \n every line, and with two different pieces next to each other.
func TestStringPiecesRepeated(t *testing.T) {
	plain := strings.Repeat("abcdefghijklmnopqrstuvwxyz0123456789ABCD", 2)
	for _, piece := range stringPieces {
		for n := 0; n <= 40; n++ {
			var b strings.Builder
			for b.Len() < 600 {
				b.WriteString(plain[:n])
				b.WriteString(piece)
			}
			checkStringAt(t, `"`+b.String()+`"`, 1)
		}
		for _, other := range stringPieces {
			checkStringAt(t, `"ab`+piece+other+`cd"`, 0)
		}
	}
}

// TestStringsDoNotAliasTheBody: decoded strings (plain ones, and escaped ones built in the
// decoder's scratch buffer) stay as they were when the body bytes are overwritten afterwards,
// and two escaped strings decoded through the same scratch buffer do not share it.
func TestStringsDoNotAliasTheBody(t *testing.T) {
	body := []byte(`{"model":"m1","messages":[{"role":"user","content":"line one\nsecond"},` +
		`{"role":"assistant","content":"x\ty é\u00e9"}]}`)
	r, err := ParseRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	for i := range body {
		body[i] = 'Z'
	}
	msgs := r.messages.items
	if r.Model != "m1" || msgs[0].get("content").str != "line one\nsecond" || msgs[1].get("content").str != "x\ty éé" ||
		msgs[0].get("role").str != "user" || msgs[1].get("role").str != "assistant" {
		t.Fatalf("values after the body was overwritten: model %q, contents %q %q", r.Model,
			msgs[0].get("content").str, msgs[1].get("content").str)
	}
	if !bytes.Equal(r.Raw, body) {
		t.Fatal("Raw is not the body")
	}
}

// TestStringErrors: a string the decoder refuses gets the error it always got (the text and
// byte offset of the byte scan it had before the one-pass decoder, or encoding/json's words for
// an invalid escape), wherever in the string the problem is.
func TestStringErrors(t *testing.T) {
	for _, c := range []struct{ lit, want string }{
		{`"abc`, "invalid JSON at byte 4: unterminated string"},
		{`"ab\`, "invalid JSON at byte 5: unterminated string"},
		{`"\"`, "invalid JSON at byte 3: unterminated string"},
		{`"\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n`, "invalid JSON at byte 69: unterminated string"},
		{"\"a\x01b\"", "invalid JSON at byte 2: control character in string"},
		{"\"0123456789abcdefghijklmnopqrstuvwxyz\n\"", "invalid JSON at byte 37: control character in string"},
		{`"a\x"`, "invalid JSON at byte 0: invalid escape sequence `\\x` in string"},
		{"\"\xff\\x\"", "invalid JSON at byte 0: invalid escape sequence `\\x` in string"},
		{`"0123456789abcdefghijklmnopqrstuvwxyz0123456789\q"`, "invalid JSON at byte 0: invalid escape sequence `\\q` in string"},
		{`"\u12"`, "invalid JSON at byte 0: invalid escape sequence `\\u12\"` in string"},
		{`"\ud800\u12"`, "invalid JSON at byte 0: invalid escape sequence `\\u12\"` in string"},
		{`"\u12`, "invalid JSON at byte 5: unterminated string"},
	} {
		d := &decoder{src: []byte(c.lit)}
		if _, err := d.string(); err == nil || err.Error() != c.want {
			t.Errorf("%q: error %v, want %q", c.lit, err, c.want)
		}
	}
}
