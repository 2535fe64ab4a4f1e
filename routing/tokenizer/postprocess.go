package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrSpecialTokens is wrapped by PostProcessor.Apply when the post-processor adds special tokens in
// a way this package does not reproduce: the ids of encode(text, add_special_tokens=True) are not
// known, so nothing may be hashed as if they were.
var ErrSpecialTokens = errors.New("special tokens cannot be reproduced")

// PostProcessor is what Hugging Face tokenizers does to the ids of one sequence after encoding it
// (tokenizer.json's "post_processor"; Hugging Face tokenizers 0.23.1
// tokenizers/src/processors/{mod,template,bert,roberta,sequence}.rs, pre_tokenizers/byte_level.rs
// and tokenizer/mod.rs PostProcessor::process), for encode(text, add_special_tokens) with either
// value of the flag. The types are the five tokenizers knows:
//
//   - null and ByteLevel: nothing is added (ByteLevel only moves offsets).
//   - TemplateProcessing: the "single" template for one encoding, the "pair" template for two;
//     each piece yields one encoding: Sequence A/B the input encoding, SpecialToken its
//     special_tokens[id].ids (dropped when add_special_tokens is false).
//   - BertProcessing: [cls] e [sep] for the first encoding, e [sep] for the others;
//     RobertaProcessing: [cls] e [sep], then [sep] e [sep]; both do nothing when
//     add_special_tokens is false.
//   - Sequence: each processor runs on the list of encodings the previous one returned (not merged:
//     after a TemplateProcessing, a BertProcessing sees one encoding per template piece, and adds
//     [sep] after each), and the list is concatenated at the end.
//
// Each flag's outcome is compiled at load into a flat template of pieces (the text's ids, or runs
// of special token ids). A shape tokenizers itself refuses or panics on (an unknown type, a template
// over more than two encodings, a piece naming a missing sequence or special token) loads as
// unsupported for that flag: Apply then fails with ErrSpecialTokens, and Exact says why.
//
// A PostProcessor is immutable and safe for concurrent use. The zero value adds nothing.
type PostProcessor struct {
	with, without       []tmplPiece // nil: the sequence alone
	whyWith, whyWithout string      // non-empty: unsupported for that flag, and why
	source              string      // where the pieces come from, for logs and explain
}

// tmplPiece is one part of a compiled template: the sequence (seq) or special token ids.
type tmplPiece struct {
	seq bool
	ids []uint32
}

// postProcessorJSON is the union of the post_processor shapes read here.
type postProcessorJSON struct {
	Type          string                     `json:"type"`
	Single        []map[string]templatePiece `json:"single"`
	Pair          []map[string]templatePiece `json:"pair"`
	SpecialTokens map[string]templateSpecial `json:"special_tokens"`
	Processors    []json.RawMessage          `json:"processors"`
	Cls           []json.RawMessage          `json:"cls"`
	Sep           []json.RawMessage          `json:"sep"`
}

type templatePiece struct {
	ID string `json:"id"`
}

type templateSpecial struct {
	IDs []uint32 `json:"ids"`
}

// maxPostProcessorDepth bounds nested Sequence processors (tokenizer.json is trusted input, but a
// loop over a hostile file must still end).
const maxPostProcessorDepth = 8

// unsupportedError says why a post-processor is not reproduced (not a load error).
type unsupportedError string

func (e unsupportedError) Error() string { return string(e) }

// parsePostProcessor reads tokenizer.json's post_processor member (raw is nil or "null" when the
// file has none). A shape this package does not reproduce is not an error: it gives an unsupported
// PostProcessor. Errors are JSON errors only.
func parsePostProcessor(raw json.RawMessage) (*PostProcessor, error) {
	p := &PostProcessor{source: "tokenizer.json post_processor"}
	for _, add := range []bool{true, false} {
		encs, err := runPostProcessor(raw, [][]tmplPiece{{{seq: true}}}, add, 0)
		var why unsupportedError
		switch {
		case errors.As(err, &why) && add:
			p.whyWith = string(why)
		case errors.As(err, &why):
			p.whyWithout = string(why)
		case err != nil:
			return nil, fmt.Errorf("decoding post_processor: %w", err)
		case add:
			p.with = flatten(encs)
		default:
			p.without = flatten(encs)
		}
	}
	return p, nil
}

// runPostProcessor applies one processor to encs, as process_encodings does.
func runPostProcessor(raw json.RawMessage, encs [][]tmplPiece, add bool, depth int) ([][]tmplPiece, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return encs, nil
	}
	var pp postProcessorJSON
	if err := json.Unmarshal(raw, &pp); err != nil {
		return nil, err
	}
	switch pp.Type {
	case "ByteLevel":
		return encs, nil
	case "TemplateProcessing":
		return runTemplate(&pp, encs, add)
	case "BertProcessing", "RobertaProcessing":
		cls, err1 := tupleID(pp.Cls)
		sep, err2 := tupleID(pp.Sep)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s cls/sep: want [token, id]", pp.Type)
		}
		if !add {
			return encs, nil
		}
		out := make([][]tmplPiece, len(encs))
		for i, e := range encs {
			var pre []tmplPiece
			switch {
			case i == 0:
				pre = []tmplPiece{{ids: []uint32{cls}}}
			case pp.Type == "RobertaProcessing":
				pre = []tmplPiece{{ids: []uint32{sep}}}
			}
			out[i] = slices.Concat(pre, e, []tmplPiece{{ids: []uint32{sep}}})
		}
		return out, nil
	case "Sequence":
		if depth >= maxPostProcessorDepth {
			return nil, unsupportedError("post_processor Sequence nested too deep")
		}
		for _, sub := range pp.Processors {
			var err error
			if encs, err = runPostProcessor(sub, encs, add, depth+1); err != nil {
				return nil, err
			}
		}
		return encs, nil
	default:
		return nil, unsupportedError(fmt.Sprintf("post_processor type %q is not reproduced", pp.Type))
	}
}

// runTemplate applies TemplateProcessing: the single template to one encoding, the pair template
// to two (defaults "$0" and "$A:0 $B:1"); every piece yields one encoding.
func runTemplate(pp *postProcessorJSON, encs [][]tmplPiece, add bool) ([][]tmplPiece, error) {
	var tmpl []map[string]templatePiece
	switch len(encs) {
	case 1:
		tmpl = pp.Single
		if tmpl == nil {
			tmpl = []map[string]templatePiece{{"Sequence": {ID: "A"}}}
		}
	case 2:
		tmpl = pp.Pair
		if tmpl == nil {
			tmpl = []map[string]templatePiece{{"Sequence": {ID: "A"}}, {"Sequence": {ID: "B"}}}
		}
	default:
		return nil, unsupportedError(fmt.Sprintf("TemplateProcessing over %d encodings (tokenizers handles 1 or 2)", len(encs)))
	}
	var out [][]tmplPiece
	for _, m := range tmpl {
		if len(m) != 1 {
			return nil, errors.New("TemplateProcessing piece: want one of Sequence, SpecialToken")
		}
		for kind, v := range m {
			switch kind {
			case "Sequence":
				i := slices.Index([]string{"A", "B"}, v.ID)
				if i < 0 || i >= len(encs) {
					return nil, unsupportedError(fmt.Sprintf("TemplateProcessing names sequence %q of %d", v.ID, len(encs)))
				}
				out = append(out, encs[i])
			case "SpecialToken":
				st, ok := pp.SpecialTokens[v.ID]
				if !ok {
					return nil, unsupportedError(fmt.Sprintf("TemplateProcessing special token %q is not in special_tokens", v.ID))
				}
				if add {
					out = append(out, []tmplPiece{{ids: slices.Clone(st.IDs)}})
				}
			default:
				return nil, fmt.Errorf("TemplateProcessing piece %q: want Sequence or SpecialToken", kind)
			}
		}
	}
	return out, nil
}

// tupleID reads BertProcessing's ["token", id] pair.
func tupleID(t []json.RawMessage) (uint32, error) {
	if len(t) != 2 {
		return 0, errors.New("want [token, id]")
	}
	var id uint32
	err := json.Unmarshal(t[1], &id)
	return id, err
}

// flatten concatenates the encodings (Encoding::merge) and drops empty special-token runs; it
// returns nil when what is left is the sequence alone (nothing added).
func flatten(encs [][]tmplPiece) []tmplPiece {
	var out []tmplPiece
	for _, e := range encs {
		for _, p := range e {
			if p.seq || len(p.ids) > 0 {
				out = append(out, p)
			}
		}
	}
	if len(out) == 1 && out[0].seq {
		return nil
	}
	if out == nil {
		out = []tmplPiece{} // the sequence dropped: not "nothing added"
	}
	return out
}

// Apply returns the ids encode(text, add_special_tokens) gives, for ids = Encode(text) (the ids
// before post-processing): the compiled template of that flag with the text's ids in it. ids is not
// modified; the result may alias it when nothing is added. The error wraps ErrSpecialTokens when
// the post-processor is unsupported for that flag.
func (p *PostProcessor) Apply(ids []uint32, addSpecialTokens bool) ([]uint32, error) {
	if p == nil {
		return ids, nil
	}
	pieces, why := p.without, p.whyWithout
	if addSpecialTokens {
		pieces, why = p.with, p.whyWith
	}
	if why != "" {
		return nil, fmt.Errorf("%w: %s", ErrSpecialTokens, why)
	}
	if pieces == nil {
		return ids, nil
	}
	n := 0
	for _, pc := range pieces {
		if pc.seq {
			n += len(ids)
		} else {
			n += len(pc.ids)
		}
	}
	out := make([]uint32, 0, n)
	for _, pc := range pieces {
		if pc.seq {
			out = append(out, ids...)
		} else {
			out = append(out, pc.ids...)
		}
	}
	return out, nil
}

// ApplyRuns is Apply for ids given as runs (Tokenizer.EncodePiecesRuns): the added ids become
// runs of their own (with the zero RunKey) around the text's, which are not copied. Errors are Apply's.
func (p *PostProcessor) ApplyRuns(runs Runs, addSpecialTokens bool) (Runs, error) {
	if p == nil {
		return runs, nil
	}
	pieces, why := p.without, p.whyWithout
	if addSpecialTokens {
		pieces, why = p.with, p.whyWith
	}
	if why != "" {
		return Runs{}, fmt.Errorf("%w: %s", ErrSpecialTokens, why)
	}
	if pieces == nil {
		return runs, nil
	}
	var out Runs
	for _, pc := range pieces {
		if !pc.seq {
			out.add(pc.ids, RunKey{})
			continue
		}
		out.addRuns(runs)
	}
	return out, nil
}

// Exact reports whether Apply reproduces the post-processor for the flag, and if not, why.
func (p *PostProcessor) Exact(addSpecialTokens bool) (bool, string) {
	if p == nil {
		return true, ""
	}
	why := p.whyWithout
	if addSpecialTokens {
		why = p.whyWith
	}
	return why == "", why
}

// Adds reports whether Apply changes the ids for the flag (false when unsupported: Apply fails).
func (p *PostProcessor) Adds(addSpecialTokens bool) bool {
	if p == nil {
		return false
	}
	if addSpecialTokens {
		return p.whyWith == "" && p.with != nil
	}
	return p.whyWithout == "" && p.without != nil
}

// String describes the add_special_tokens=True template, e.g. "[2] $A (tokenizer.json
// post_processor)", "$A (…)" when nothing is added, or "unsupported: …".
func (p *PostProcessor) String() string {
	if p == nil {
		return "$A"
	}
	if p.whyWith != "" {
		return "unsupported: " + p.whyWith
	}
	var parts []string
	for _, pc := range p.with {
		if pc.seq {
			parts = append(parts, "$A")
		} else {
			parts = append(parts, fmt.Sprint(pc.ids))
		}
	}
	if p.with == nil {
		parts = []string{"$A"}
	}
	return strings.Join(parts, " ") + " (" + p.source + ")"
}

// PostProcessor returns the post-processor tokenizer.json declares (never nil). Hugging Face
// transformers may replace it when it loads the tokenizer (see ForTransformers).
func (t *Tokenizer) PostProcessor() *PostProcessor {
	if t.post == nil {
		return &PostProcessor{source: "tokenizer.json post_processor"}
	}
	return t.post
}
