package tokenizer

import (
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// cgj is U+034F COMBINING GRAPHEME JOINER.
const cgj = "\u034f"

// nfc returns the NFC form of s as Hugging Face tokenizers computes it: the
// crate unicode-normalization-alignments 0.1.12 `nfc()`, with Unicode 9.0.0
// data and full canonical ordering of any number of combining marks.
//
// golang.org/x/text/unicode/norm gives the same result except in two cases,
// where the segment is normalized again by fullNFC:
//   - x/text implements the Stream-Safe Text Format (UAX #15 §13): after 30
//     non-starters in a row it inserts a U+034F and reorders and composes
//     each side separately (seen as more U+034F in the output than the input);
//   - x/text knows combining classes and decompositions added after Unicode
//     9.0 (nfcNewer, 175 code points such as U+1ABF or U+11938); HF treats
//     them as plain starters. Only code points from nfcNewer in the input or
//     the output can make the results differ (Unicode's normalization
//     stability policy), so other text keeps the fast path.
//
// ASCII text is its own NFC form in every Unicode version (no ASCII code point
// decomposes, composes or has a nonzero combining class), so it is returned
// unchanged after one word-at-a-time scan: most prompt text is ASCII, and the
// scan costs a fraction of x/text's per-byte quick check plus hasNFCNewer.
func nfc(s string) string {
	if isASCII(s) {
		return s
	}
	out := norm.NFC.String(s)
	if hasNFCNewer(s) || (out != s && hasNFCNewer(out)) ||
		(strings.Contains(out, cgj) && strings.Count(out, cgj) != strings.Count(s, cgj)) {
		return fullNFC(s)
	}
	return out
}

// isASCII reports whether every byte of s is below 0x80, 32 bytes at a time (four eight-byte
// loads OR-ed, one test), then eight.
func isASCII(s string) bool {
	i := 0
	for ; i+32 <= len(s); i += 32 {
		if (le64(s, i)|le64(s, i+8)|le64(s, i+16)|le64(s, i+24))&0x8080808080808080 != 0 {
			return false
		}
	}
	for ; i+8 <= len(s); i += 8 {
		if le64(s, i)&0x8080808080808080 != 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// runeRange is the inclusive range lo..hi.
type runeRange struct{ lo, hi rune }

// nfcNewerBMP is nfcNewer as a bitset over the BMP (8 KiB).
var nfcNewerBMP [0x10000 / 64]uint64

func init() {
	for _, rg := range nfcNewer {
		for r := rg.lo; r <= rg.hi && r < 0x10000; r++ {
			nfcNewerBMP[r>>6] |= 1 << (r & 63)
		}
	}
}

// isNFCNewer reports whether r is in nfcNewer.
func isNFCNewer(r rune) bool {
	if r < 0x10000 {
		return r >= 0 && nfcNewerBMP[r>>6]&(1<<(r&63)) != 0
	}
	lo, hi := 0, len(nfcNewer)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if nfcNewer[m].hi < r {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo < len(nfcNewer) && nfcNewer[lo].lo <= r
}

// hasNFCNewer reports whether s contains a code point of nfcNewer.
func hasNFCNewer(s string) bool {
	for i := 0; i < len(s); {
		if s[i] < 0xDF { // ASCII, continuation bytes, and leads of runes below U+07C0
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if isNFCNewer(r) {
			return true
		}
		i += n
	}
	return false
}

// Hangul syllable constants (Unicode §3.12).
const (
	hangulSBase  = 0xAC00
	hangulLBase  = 0x1100
	hangulVBase  = 0x1161
	hangulTBase  = 0x11A7
	hangulLCount = 19
	hangulVCount = 21
	hangulTCount = 28
	hangulNCount = hangulVCount * hangulTCount
	hangulSCount = hangulLCount * hangulNCount
)

// invalidByte marks a byte of invalid UTF-8 in fullNFC's rune buffer: the
// byte b is stored as invalidByte - b (negative), a starter that never
// composes, written back unchanged.
const invalidByte = -1

// fullNFC is the canonical NFC algorithm (UAX #15 / Unicode §3.11) as
// unicode-normalization-alignments implements it (decompose.rs,
// recompose.rs): canonical decomposition, stable canonical ordering of each
// run of non-starters, canonical composition. Decompositions, combining
// classes and pair compositions come from x/text's tables, restricted to
// Unicode 9.0.0 by nfcNewer; time is O(n log n).
func fullNFC(s string) string {
	// Canonical decomposition.
	rs := make([]rune, 0, len(s))
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			rs = append(rs, rune(invalidByte-int(s[i])))
		} else {
			rs = decompose(rs, r)
		}
		i += n
	}
	// Canonical ordering: stable sort of each run of non-starters by class.
	type mark struct {
		r   rune
		ccc uint8
	}
	var run []mark
	for i := 0; i < len(rs); {
		if combiningClass(rs[i]) == 0 {
			i++
			continue
		}
		j := i
		run = run[:0]
		for j < len(rs) && combiningClass(rs[j]) != 0 {
			run = append(run, mark{rs[j], combiningClass(rs[j])})
			j++
		}
		slices.SortStableFunc(run, func(a, b mark) int { return int(a.ccc) - int(b.ccc) })
		for k, m := range run {
			rs[i+k] = m.r
		}
		i = j
	}
	// Canonical composition.
	out := rs[:0]
	starter := -1 // index in out of the last starter
	last := -1    // class of the last rune after the starter; -1: none
	for _, r := range rs {
		ccc := int(combiningClass(r))
		if starter >= 0 && (last == -1 || (last != 0 && last < ccc)) {
			if p, ok := composePair(out[starter], r); ok {
				out[starter] = p
				continue
			}
		}
		if ccc == 0 {
			starter, last = len(out), -1
		} else {
			last = ccc
		}
		out = append(out, r)
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range out {
		if r < 0 {
			b.WriteByte(byte(invalidByte - r))
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// decompose appends the full canonical decomposition of r to dst.
func decompose(dst []rune, r rune) []rune {
	if r >= hangulSBase && r < hangulSBase+hangulSCount {
		si := r - hangulSBase
		dst = append(dst, hangulLBase+si/hangulNCount, hangulVBase+(si%hangulNCount)/hangulTCount)
		if t := si % hangulTCount; t != 0 {
			dst = append(dst, hangulTBase+t)
		}
		return dst
	}
	if isNFCNewer(r) {
		return append(dst, r)
	}
	d := norm.NFD.PropertiesString(string(r)).Decomposition()
	if d == nil {
		return append(dst, r)
	}
	for _, c := range string(d) {
		if c == r {
			dst = append(dst, c)
			continue
		}
		dst = decompose(dst, c)
	}
	return dst
}

// combiningClass returns the canonical combining class of r in Unicode
// 9.0.0 (0 for the invalid-byte markers).
func combiningClass(r rune) uint8 {
	if r < 0x300 || isNFCNewer(r) {
		return 0 // no combining marks below U+0300
	}
	return norm.NFD.PropertiesString(string(r)).CCC()
}

// composePair returns the primary composite of starter s and c, if any.
func composePair(s, c rune) (rune, bool) {
	if s < 0 || c < 0 || isNFCNewer(s) || isNFCNewer(c) {
		return 0, false
	}
	if s >= hangulLBase && s < hangulLBase+hangulLCount && c >= hangulVBase && c < hangulVBase+hangulVCount {
		return hangulSBase + ((s-hangulLBase)*hangulVCount+(c-hangulVBase))*hangulTCount, true
	}
	if s >= hangulSBase && s < hangulSBase+hangulSCount && (s-hangulSBase)%hangulTCount == 0 &&
		c > hangulTBase && c < hangulTBase+hangulTCount {
		return s + (c - hangulTBase), true
	}
	// The pair is in canonical order (c is not blocked from s), so NFC of
	// the two runes is their composite when one exists.
	pair := string(s) + string(c)
	res := norm.NFC.String(pair)
	if res == pair {
		return 0, false
	}
	p, n := utf8.DecodeRuneInString(res)
	if n != len(res) || isNFCNewer(p) {
		return 0, false // no composite, or one Unicode 9.0 does not have
	}
	return p, true
}
