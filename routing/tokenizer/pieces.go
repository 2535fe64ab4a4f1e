package tokenizer

import (
	"strings"

	"github.com/kvroute/kvroute/internal/jinja"
)

// pieceTok is what the tokenizer keeps in a noted piece's note (under noteKey): the piece's
// region and its ids for one tokenizer.
type pieceTok struct {
	tok    uint64 // Tokenizer.id: a pointer would keep a replaced tokenizer alive across reloads
	s1, e2 int
	ids    []uint32
}

// noteKey is the tokenizer's slot in a piece's note (jinja.Note).
var noteKey = jinja.NewNoteKey()

// bytes is what the note is charged for pt: its ids and a fixed overhead.
func (pt *pieceTok) bytes() int64 { return int64(4*len(pt.ids)) + segmentEntryOverhead }

// minNotedPiece is the shortest piece whose tokenization is kept in its note, in bytes.
const minNotedPiece = 64

// EncodePiecesRuns returns Encode(the pieces' texts joined) as runs, without joining the noted
// pieces (a piece with a Note, as the template cache's replayed chat turns are). A noted piece's
// region is a run of its own, shared with the note and named by a RunKey (Runs.Keys), so a
// caller can keep what it derives from the run's ids beside them (the router: their block
// hashes); the gaps' ids share one new slice. A long conversation's ids are then neither copied
// nor scanned again. pieces are only read; a piece's Note must always come with the same Text.
//
// How. Encode splits its text at added tokens (leftmost-longest) and encodes the segments
// between them independently. A noted piece's region from its first added token to the end of
// its last added token whose match cannot depend on text after the piece (no added token extends
// the text from that position on: region below) is encoded once, standalone, and kept in the
// piece's note; the text around regions (a piece's head and tail, other pieces) forms gaps that
// are encoded as Encode would. The result is Encode's exactly when every region starts at a
// match boundary of the joined text: the gap before it must hold no added token that would run
// into the region (checked at each boundary, straddles); otherwise the piece is taken as gap
// text. Without a segment cache or without added tokens the texts are joined and encoded, as one
// run with the zero key.
func (t *Tokenizer) EncodePiecesRuns(pieces []jinja.Piece) Runs {
	var runs Runs
	if t.segs == nil || len(t.added.first) == 0 {
		runs.add(t.Encode(joinPieces(pieces)), RunKey{})
		return runs
	}
	type step struct {
		gap   string
		inner []uint32 // a region's ids after gap (shared with the cache: only read)
		key   RunKey
	}
	steps := make([]step, 0, 2*len(pieces)/3+2)
	var gap gapText
	gapBytes := 0
	for i := range pieces {
		p := &pieces[i]
		if p.Note == nil || len(p.Text) < minNotedPiece {
			gap.add(p.Text)
			continue
		}
		s1, e2, inner, key := t.pieceRegion(p)
		if e2 == 0 {
			gap.add(p.Text)
			continue
		}
		gap.add(p.Text[:s1])
		g := gap.String()
		if t.added.straddles(g, p.Text[s1:]) {
			gap.reset(g)
			gap.add(p.Text[s1:])
			continue
		}
		steps = append(steps, step{gap: g, inner: inner, key: key})
		gapBytes += len(g)
		gap.reset("")
		gap.add(p.Text[e2:])
	}
	last := gap.String()
	if len(steps) == 0 {
		runs.add(t.appendWithSegments(nil, last, true), RunKey{})
		return runs
	}
	// The gaps' ids go into one slice; a run refers to it by offsets until it stops growing.
	own := make([]uint32, 0, (gapBytes+len(last))/3+len(steps)+4)
	ends := make([]int, len(steps)+1)
	first := true
	// A conversation's gaps are mostly the same short text (Qwen's "\n" between two turns):
	// a gap equal to the one before it (and not the prompt's first) copies that one's ids.
	prevGap, prevFrom, prevTo := "", 0, 0
	for i, st := range steps {
		from := len(own)
		if !first && i > 0 && st.gap == prevGap && len(st.gap) <= 64 {
			own = append(own, own[prevFrom:prevTo]...)
		} else {
			own = t.appendWithSegments(own, st.gap, first)
		}
		ends[i] = len(own)
		prevGap, prevFrom, prevTo = st.gap, from, len(own)
		first = false
	}
	own = t.appendWithSegments(own, last, first)
	ends[len(steps)] = len(own)
	n := 2*len(steps) + 1
	runs = Runs{IDs: make([][]uint32, 0, n), Keys: make([]RunKey, 0, n)}
	from := 0
	for i, st := range steps {
		if ends[i] > from {
			runs.add(own[from:ends[i]], RunKey{})
		}
		if len(st.inner) > 0 {
			runs.add(st.inner, st.key)
		}
		from = ends[i]
	}
	if ends[len(steps)] > from || len(runs.IDs) == 0 {
		runs.add(own[from:ends[len(steps)]], RunKey{})
	}
	return runs
}

// pieceRegion returns the region [s1, e2) of a noted piece and its ids, from the note or
// computed and stored there, and the ids' key. e2 = 0 means the piece has no region.
func (t *Tokenizer) pieceRegion(p *jinja.Piece) (s1, e2 int, inner []uint32, key RunKey) {
	pt, ok := p.Note.Load(noteKey).(*pieceTok)
	if !ok || pt.tok != t.id {
		pt = &pieceTok{tok: t.id}
		pt.s1, pt.e2 = t.added.region(p.Text)
		if pt.e2 > 0 {
			pt.ids = t.appendWithSegments(nil, p.Text[pt.s1:pt.e2], false)
		}
		p.Note.Store(noteKey, pt, pt.bytes())
	}
	return pt.s1, pt.e2, pt.ids, RunKey{Note: p.Note, tok: t.id}
}

// gapText collects the text between two regions: one part is kept as is, more are joined.
type gapText struct {
	one   string
	parts int
	sb    strings.Builder
}

func (g *gapText) add(s string) {
	if s == "" {
		return
	}
	switch g.parts {
	case 0:
		g.one = s
	case 1:
		g.sb = strings.Builder{}
		g.sb.Grow(len(g.one) + len(s))
		g.sb.WriteString(g.one)
		g.sb.WriteString(s)
	default:
		g.sb.WriteString(s)
	}
	g.parts++
}

func (g *gapText) String() string {
	if g.parts <= 1 {
		return g.one
	}
	return g.sb.String()
}

// reset starts a gap holding s.
func (g *gapText) reset(s string) {
	g.one, g.parts, g.sb = "", 0, strings.Builder{}
	g.add(s)
}

func joinPieces(pieces []jinja.Piece) string {
	if len(pieces) == 1 {
		return pieces[0].Text
	}
	n := 0
	for _, p := range pieces {
		n += len(p.Text)
	}
	var sb strings.Builder
	sb.Grow(n)
	for _, p := range pieces {
		sb.WriteString(p.Text)
	}
	return sb.String()
}
