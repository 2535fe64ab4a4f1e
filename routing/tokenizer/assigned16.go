package tokenizer

import (
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/rangetable"
)

// Code points assigned in Unicode 17.0 are unassigned (\p{Cn}) for Hugging
// Face's Oniguruma, which knows Unicode 16.0.0 (package doc, Unicode policy).
// assigned16 is golang.org/x/text's table of the code points assigned in
// Unicode 16.0.0; newer is the set assigned in the Go toolchain's tables but
// not in Unicode 16.0.0.
var (
	assigned16   = rangetable.Assigned("16.0.0")
	newerOnce    sync.Once
	newerInGo    *unicode.RangeTable
	newerBMPMask *[0x10000 / 64]uint64 // bit r set: BMP rune r is newer than Unicode 16
)

// assignedIn16 reports whether r was assigned in Unicode 16.0.0.
func assignedIn16(r rune) bool { return unicode.Is(assigned16, r) }

// initNewer builds the table of code points Go assigns but Unicode 16.0.0
// does not (a few thousand, all of them new in Unicode 17.0).
func initNewer() {
	newerOnce.Do(func() {
		var runes []rune
		mask := new([0x10000 / 64]uint64)
		// Go's assigned code points; private use and surrogates (Co, Cs)
		// have not changed since Unicode 2.0.
		for _, tab := range []*unicode.RangeTable{unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z, unicode.Cc, unicode.Cf} {
			rangetable.Visit(tab, func(r rune) {
				if !unicode.Is(assigned16, r) {
					runes = append(runes, r)
					if r < 0x10000 {
						mask[r/64] |= 1 << (r % 64)
					}
				}
			})
		}
		newerInGo, newerBMPMask = rangetable.New(runes...), mask
	})
}

// isNewerThan16 reports whether r is assigned in Go's tables but not in
// Unicode 16.0.0. initNewer must have run.
func isNewerThan16(r rune) bool {
	if r < 0x10000 {
		return newerBMPMask[r/64]&(1<<(r%64)) != 0
	}
	return unicode.Is(newerInGo, r)
}

// Stand-ins of the same UTF-8 length that are unassigned in every Unicode
// version (noncharacters and a never-assigned Greek code point), so a regex
// running on Go's Unicode 17 tables sees a Unicode 17 addition as \p{Cn}.
const (
	unassigned2 = '\u0378'     // 2 bytes
	unassigned3 = '\uFDD0'     // 3 bytes, noncharacter
	unassigned4 = '\U0001FFFE' // 4 bytes, noncharacter
)

// asUnicode16 returns s with every code point that is newer than Unicode
// 16.0.0 replaced by an unassigned code point of the same UTF-8 length, so
// byte offsets into the result are byte offsets into s. It returns s itself
// (no allocation) when nothing is replaced. initNewer must have run.
func asUnicode16(s string) string {
	var b []byte
	for i := 0; i < len(s); {
		if s[i] < 0xE0 { // ASCII and 2-byte sequences: nothing below U+0800 is new
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if n > 1 && isNewerThan16(r) {
			if b == nil {
				b = []byte(s)
			}
			switch n {
			case 2:
				utf8.EncodeRune(b[i:], unassigned2)
			case 3:
				utf8.EncodeRune(b[i:], unassigned3)
			default:
				utf8.EncodeRune(b[i:], unassigned4)
			}
		}
		i += n
	}
	if b == nil {
		return s
	}
	return string(b)
}
