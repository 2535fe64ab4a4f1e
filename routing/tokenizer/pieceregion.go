package tokenizer

import "strings"

// The region rule of EncodePiecesRuns (pieces.go): which part of a noted piece encodes the same
// wherever the piece stands, and whether the text before a region could run into it.

// region returns [s1, e2) of text: s1 the start of its first added token, e2 the end of the last
// added token such that every position the leftmost-longest scan examines from s1 up to it
// chooses the same way whatever text follows. A position q can depend on what follows only when
// some added token is longer than text[q:] and starts with it. No added token gives e2 = 0.
func (a *addedTokens) region(text string) (s1, e2 int) {
	s, e, _ := a.find(text)
	if s < 0 {
		return 0, 0
	}
	s1 = s
	pos := s
	for s >= 0 {
		if a.dependsOnNext(text, pos, s+1) {
			break
		}
		e2, pos = e, e
		s, e, _ = a.find(text[pos:])
		s, e = s+pos, e+pos
		if s < pos {
			break
		}
	}
	if e2 == 0 {
		return 0, 0
	}
	return s1, e2
}

// dependsOnNext reports whether some position in [from, to) of text is a prefix of a longer added
// token (so text after text's end could complete a match there).
func (a *addedTokens) dependsOnNext(text string, from, to int) bool {
	for q := max(from, len(text)-a.maxLen+1); q < to; q++ {
		sfx := text[q:]
		for _, c := range a.byFirst[text[q]] {
			if len(c.tok) > len(sfx) && strings.HasPrefix(c.tok, sfx) {
				return true
			}
		}
	}
	return false
}

// straddles reports whether an added token could start in gap and end in the text after it
// (next): then the gap's last segment and next's first added token are not where a scan of
// the joined text puts them. It is conservative: a token that might continue past next counts.
func (a *addedTokens) straddles(gap, next string) bool {
	for q := max(0, len(gap)-a.maxLen+1); q < len(gap); q++ {
		sfx := gap[q:]
		for _, c := range a.byFirst[gap[q]] {
			if len(c.tok) <= len(sfx) || !strings.HasPrefix(c.tok, sfx) {
				continue
			}
			rest := c.tok[len(sfx):]
			if strings.HasPrefix(next, rest) || strings.HasPrefix(rest, next) {
				return true
			}
		}
	}
	return false
}
