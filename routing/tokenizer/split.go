package tokenizer

import (
	"fmt"
	"strings"
)

// piece is one pre-token on the general path; first says it starts at
// offset 0 of the original text (Metaspace's prepend_scheme "first").
type piece struct {
	s     string
	first bool
}

// stage is one pre-tokenizer of a (possibly Sequence) pre_tokenizer: it
// calls emit with each non-empty piece p splits into, in order (Hugging
// Face PreTokenizedString::split drops empty pieces). Stages stream: no
// list of a text's pieces or matches is built, so memory stays a small
// multiple of the text however many pre-tokens it has.
type stage interface {
	split(p piece, emit func(piece))
}

// Split behaviors (HF SplitDelimiterBehavior).
const (
	behRemoved = iota
	behIsolated
	behMergedWithPrevious
	behMergedWithNext
	behContiguous
)

var behaviors = map[string]int{
	"Removed": behRemoved, "Isolated": behIsolated, "MergedWithPrevious": behMergedWithPrevious,
	"MergedWithNext": behMergedWithNext, "Contiguous": behContiguous,
}

// splitStage is HF's Split pre-tokenizer (pre_tokenizers/split.rs): the
// pattern's matches (or, inverted, the text between them) are delimiters,
// handled by behavior.
type splitStage struct {
	re       *splitRegex // Regex pattern, or nil
	lit      string      // String pattern (when re is nil)
	behavior int
	invert   bool
}

// cut is [start, end) of a piece and whether it is a delimiter.
type cut struct {
	start, end int
	match      bool
}

func (st *splitStage) split(p piece, emit func(piece)) {
	s := p.s
	b := behaviorState{behavior: st.behavior, out: func(c cut) {
		if c.end > c.start {
			emit(piece{s: s[c.start:c.end], first: p.first && c.start == 0})
		}
	}}
	prev := 0
	add := func(a, e int) {
		if prev != a {
			b.push(cut{prev, a, st.invert})
		}
		b.push(cut{a, e, !st.invert})
		prev = e
	}
	if st.re != nil {
		st.re.each(s, add)
	} else if st.lit != "" {
		for i := 0; ; {
			k := strings.Index(s[i:], st.lit)
			if k < 0 {
				break
			}
			add(i+k, i+k+len(st.lit))
			i += k + len(st.lit)
		}
	}
	if prev != len(s) {
		b.push(cut{prev, len(s), st.invert})
	}
	b.flush()
}

// behaviorState applies a delimiter behavior to the cuts of one piece as
// they come (matches marked), passing the kept pieces to out; it is HF's
// NormalizedString::split folds, streamed with one pending cut.
type behaviorState struct {
	behavior  int
	out       func(cut)
	pending   cut
	has       bool // pending is set
	prevMatch bool // the previous cut was a match
}

func (b *behaviorState) push(c cut) {
	switch b.behavior {
	case behRemoved:
		if !c.match {
			b.out(c)
		}
	case behIsolated:
		b.out(c)
	case behMergedWithPrevious:
		// A match joins the piece before it, unless that was a match too.
		if c.match && !b.prevMatch && b.has {
			b.pending.end = c.end
		} else {
			b.flush()
			b.pending, b.has = c, true
		}
	case behContiguous:
		// Runs of matches (and of non-matches) become one piece each.
		if c.match == b.prevMatch && b.has {
			b.pending.end = c.end
		} else {
			b.flush()
			b.pending, b.has = c, true
		}
	case behMergedWithNext:
		// A match joins the piece after it, unless that is a match too.
		if b.has && !c.match {
			b.out(cut{b.pending.start, c.end, false})
			b.has = false
		} else {
			b.flush()
			if c.match {
				b.pending, b.has = c, true
			} else {
				b.out(c)
			}
		}
	}
	b.prevMatch = c.match
}

// flush passes the pending cut on.
func (b *behaviorState) flush() {
	if b.has {
		b.out(b.pending)
		b.has = false
	}
}

// gpt2Regex is the split of HF's ByteLevel pre-tokenizer with use_regex
// (pre_tokenizers/byte_level.rs).
const gpt2Regex = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// byteLevelStage is HF's ByteLevel pre-tokenizer apart from the byte → GPT-2
// alphabet mapping, which the byte-level BPE model does: add_prefix_space
// prepends a space to every piece that does not start with one, use_regex
// splits by gpt2Regex.
type byteLevelStage struct {
	prefixSpace bool
	re          *splitRegex
}

func (st *byteLevelStage) split(p piece, emit func(piece)) {
	if st.prefixSpace && !strings.HasPrefix(p.s, " ") {
		p.s = " " + p.s
	}
	if st.re == nil {
		emit(p)
		return
	}
	(&splitStage{re: st.re, behavior: behIsolated}).split(p, emit)
}

// metaspaceStage is HF's Metaspace pre-tokenizer (pre_tokenizers/
// metaspace.rs): spaces become the replacement, which is prepended per
// prepend_scheme (always; first: only to the piece at offset 0 of the
// text; never), and with split the text is cut before each replacement
// (MergedWithNext).
type metaspaceStage struct {
	repl   string
	scheme string
	split_ bool
}

func (st *metaspaceStage) split(p piece, emit func(piece)) {
	s := strings.ReplaceAll(p.s, " ", st.repl)
	if !strings.HasPrefix(s, st.repl) && (st.scheme == "always" || st.scheme == "first" && p.first) {
		s = st.repl + s
	}
	p.s = s
	if !st.split_ {
		emit(p)
		return
	}
	(&splitStage{lit: st.repl, behavior: behMergedWithNext}).split(p, emit)
}

// preTokJSON is a tokenizer.json pre_tokenizer.
type preTokJSON struct {
	Type           string       `json:"type"`
	PreTokenizers  []preTokJSON `json:"pretokenizers"`
	Pattern        *patternJSON `json:"pattern"`
	Behavior       string       `json:"behavior"`
	Invert         bool         `json:"invert"`
	AddPrefixSpace *bool        `json:"add_prefix_space"`
	UseRegex       *bool        `json:"use_regex"`
	Replacement    string       `json:"replacement"`
	PrependScheme  string       `json:"prepend_scheme"`
	Split          *bool        `json:"split"`
}

// buildStages flattens p into stages. byteLevel reports a ByteLevel
// pre-tokenizer, which must be the last one (its alphabet mapping is done by
// the model, after every split).
func buildStages(p *preTokJSON) (stages []stage, byteLevel bool, err error) {
	list := []preTokJSON{*p}
	if p.Type == "Sequence" {
		list = p.PreTokenizers
	}
	for i := range list {
		q := &list[i]
		if byteLevel {
			return nil, false, fmt.Errorf("checking pre_tokenizer: %w: ByteLevel must be the last pre-tokenizer", ErrUnsupported)
		}
		switch q.Type {
		case "Split":
			st := &splitStage{invert: q.Invert}
			b, ok := behaviors[q.Behavior]
			if !ok {
				return nil, false, fmt.Errorf("checking pre_tokenizer Split: %w: behavior %q", ErrUnsupported, q.Behavior)
			}
			st.behavior = b
			switch {
			case q.Pattern != nil && q.Pattern.Regex != nil:
				if st.re, err = compileRegex(*q.Pattern.Regex); err != nil {
					return nil, false, fmt.Errorf("checking pre_tokenizer Split: %w", err)
				}
			case q.Pattern != nil && q.Pattern.String != nil:
				st.lit = *q.Pattern.String
			default:
				return nil, false, fmt.Errorf("checking pre_tokenizer Split: %w: no pattern", ErrUnsupported)
			}
			stages = append(stages, st)
		case "ByteLevel":
			st := &byteLevelStage{prefixSpace: q.AddPrefixSpace == nil || *q.AddPrefixSpace} // HF default: true
			if q.UseRegex == nil || *q.UseRegex {                                            // HF default: true
				if st.re, err = compileRegex(gpt2Regex); err != nil {
					return nil, false, err
				}
			}
			if st.prefixSpace || st.re != nil {
				stages = append(stages, st)
			}
			byteLevel = true
		case "Metaspace":
			st := &metaspaceStage{repl: q.Replacement, scheme: q.PrependScheme, split_: q.Split == nil || *q.Split}
			if st.repl == "" {
				st.repl = "▁"
			}
			switch st.scheme {
			case "": // older files: add_prefix_space false means never
				st.scheme = "always"
				if q.AddPrefixSpace != nil && !*q.AddPrefixSpace {
					st.scheme = "never"
				}
			case "always", "first", "never":
			default:
				return nil, false, fmt.Errorf("checking pre_tokenizer Metaspace: %w: prepend_scheme %q", ErrUnsupported, st.scheme)
			}
			stages = append(stages, st)
		default:
			return nil, false, fmt.Errorf("checking pre_tokenizer: %w: type %q (implemented: Split, ByteLevel, Metaspace, Sequence)", ErrUnsupported, q.Type)
		}
	}
	return stages, byteLevel, nil
}
