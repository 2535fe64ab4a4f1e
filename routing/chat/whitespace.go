package chat

import (
	"errors"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Jinja2's whitespace handling, done on the template source before ardanlabs/jinja sees it.
//
// ardanlabs/jinja v1.12.0 applies trim_blocks, lstrip_blocks and the "-" markers to the nearest
// text segment even when a {{ … }} tag stands between it and the block tag, so
// "{% for %}{{ x }}\n{% endfor %}" loses its "\n" (Jinja2 keeps it), and "a \n{{ x }}{%- if %}"
// loses "a"'s trailing whitespace. normalizeTemplate therefore applies Jinja2 3.1's lexer rules
// itself (jinja2/lexer.py: newline normalization, keep_trailing_newline=False, "-" strips all
// whitespace on its side, "+" keeps it, lstrip_blocks for block and comment tags, trim_blocks
// for block and comment ends) and returns a source in which every block tag is written
// {%+ … +%} (the engine then trims nothing), variable tags carry no markers, and comments are
// gone.

var newlineRE = regexp.MustCompile(`\r\n|\r|\n`)

// rawBeginRE and rawEndRE match {% raw %} and {% endraw %} with their markers (Jinja2's
// raw_begin and raw_end rules).
var (
	rawBeginRE = regexp.MustCompile(`^\{%([-+]?)\s*raw\s*(-?)%\}`)
	rawEndRE   = regexp.MustCompile(`\{%([-+]?)\s*endraw\s*([-+]?)%\}`)
)

// errUnclosedTag is returned for a tag, comment or raw block without its end.
var errUnclosedTag = errors.New("unclosed tag")

// pyIsSpace reports whether Python's str.isspace is true for r (what Jinja2's \s and rstrip
// use).
func pyIsSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// rstripPy is Python's str.rstrip().
func rstripPy(s string) string { return strings.TrimRightFunc(s, pyIsSpace) }

// lstripPy is Python's str.lstrip().
func lstripPy(s string) string { return strings.TrimLeftFunc(s, pyIsSpace) }

// allSpacePy reports whether s is non-empty and all whitespace (re.fullmatch(r"\s+", s)).
func allSpacePy(s string) bool {
	return s != "" && strings.TrimLeftFunc(s, pyIsSpace) == ""
}

// normalizeTemplate rewrites a template source so that ardanlabs/jinja renders it with Jinja2's
// whitespace semantics under trim_blocks=True and lstrip_blocks=True.
func normalizeTemplate(src string) (string, error) {
	out, _, err := normalizeTemplateBlocks(src)
	return out, err
}

// normalizeTemplateBlocks is normalizeTemplate that also returns the bodies of the block tags
// ({% … %} without delimiters and markers), in source order.
func normalizeTemplateBlocks(src string) (string, []string, error) {
	lines := newlineRE.Split(src, -1)
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	src = strings.Join(lines, "\n")

	var out strings.Builder
	var blocks []string
	out.Grow(len(src) + len(src)/8)
	lineStarting := true // the previous token ended a line (or this is the start)
	pos := 0
	for pos < len(src) {
		i := nextTagStart(src, pos)
		if i < 0 {
			writeText(&out, src[pos:])
			break
		}
		text := src[pos:i]
		if m := rawBeginRE.FindStringSubmatchIndex(src[i:]); m != nil {
			left := src[i+m[2] : i+m[3]]
			text = stripLeft(text, left, true, lineStarting)
			writeText(&out, text)
			body := i + m[1]
			if src[i+m[4]:i+m[5]] == "-" {
				body += len(src[body:]) - len(lstripPy(src[body:]))
			}
			e := rawEndRE.FindStringSubmatchIndex(src[body:])
			if e == nil {
				return "", nil, errUnclosedTag
			}
			content := src[body : body+e[0]]
			content = stripLeft(content, src[body+e[2]:body+e[3]], true, false)
			out.WriteString("{%+ raw +%}")
			out.WriteString(content)
			out.WriteString("{%+ endraw +%}")
			pos = body + e[1]
			pos, lineStarting = consumeRight(src, pos, src[body+e[4]:body+e[5]], true)
			continue
		}
		kind := src[i+1]
		j := i + 2
		left := ""
		if j < len(src) && (src[j] == '-' || src[j] == '+') {
			left = src[j : j+1]
			j++
		}
		end, right, err := tagEnd(src, j, kind)
		if err != nil {
			return "", nil, err
		}
		body := src[j:end]
		isBlock := kind == '%' || kind == '#'
		writeText(&out, stripLeft(text, left, isBlock, lineStarting))
		switch kind {
		case '{':
			out.WriteString("{{")
			out.WriteString(body)
			out.WriteString("}}")
		case '%':
			blocks = append(blocks, body)
			out.WriteString("{%+")
			out.WriteString(body)
			out.WriteString("+%}")
		}
		closeLen := 2
		if right != "" {
			closeLen = 3
		}
		pos, lineStarting = consumeRight(src, end+closeLen, right, isBlock)
	}
	return out.String(), blocks, nil
}

// nextTagStart returns the index of the next "{{", "{%" or "{#" at or after pos, or -1.
func nextTagStart(src string, pos int) int {
	for {
		k := strings.IndexByte(src[pos:], '{')
		if k < 0 || pos+k+1 >= len(src) {
			return -1
		}
		switch src[pos+k+1] {
		case '{', '%', '#':
			return pos + k
		}
		pos += k + 1
	}
}

// tagEnd finds the end of a tag whose body starts at j: the index of its closing marker
// ("-"/"+" or the closer itself) and the marker. Quoted strings in {{ }} and {% %} tags are
// skipped, so a "}}" inside a string literal does not end the tag.
func tagEnd(src string, j int, kind byte) (int, string, error) {
	closer := "}}"
	switch kind {
	case '%':
		closer = "%}"
	case '#':
		closer = "#}"
	}
	for k := j; k < len(src); k++ {
		c := src[k]
		if kind != '#' && (c == '\'' || c == '"') {
			for k++; k < len(src) && src[k] != c; k++ {
				if src[k] == '\\' {
					k++
				}
			}
			continue
		}
		if strings.HasPrefix(src[k:], closer) {
			return k, "", nil
		}
		if (c == '-' || c == '+') && strings.HasPrefix(src[k+1:], closer) && (c == '-' || kind != '{') {
			return k, string(c), nil
		}
	}
	return 0, "", errUnclosedTag
}

// stripLeft applies the left-side whitespace rule of a tag to the text before it: "-" strips
// all trailing whitespace; otherwise, for block and comment tags without "+", lstrip_blocks
// strips the spaces between the line start and the tag.
func stripLeft(text, marker string, isBlock, lineStarting bool) string {
	switch {
	case marker == "-":
		return rstripPy(text)
	case marker == "+" || !isBlock:
		return text
	}
	lpos := strings.LastIndexByte(text, '\n') + 1
	if (lpos > 0 || lineStarting) && allSpacePy(text[lpos:]) {
		return text[:lpos]
	}
	return text
}

// consumeRight skips what a tag's end swallows: all whitespace after "-", one newline after a
// block or comment end without "+" (trim_blocks). It returns the new position and whether
// the consumed token ended with a newline.
func consumeRight(src string, pos int, marker string, isBlock bool) (int, bool) {
	lastNL := src[pos-1] == '\n'
	switch {
	case marker == "-":
		rest := lstripPy(src[pos:])
		if n := len(src) - len(rest); n > pos {
			r, _ := utf8.DecodeLastRuneInString(src[pos:n])
			pos, lastNL = n, r == '\n'
		}
	case marker == "+" || !isBlock:
	case pos < len(src) && src[pos] == '\n':
		pos, lastNL = pos+1, true
	}
	return pos, lastNL
}

// writeText writes template text. A text ending in "{" is written with its last "{" as an
// expression, so it cannot join the next tag's opener into a new "{{".
func writeText(out *strings.Builder, text string) {
	if strings.HasSuffix(text, "{") {
		out.WriteString(text[:len(text)-1])
		out.WriteString("{{ '{' }}")
		return
	}
	out.WriteString(text)
}
