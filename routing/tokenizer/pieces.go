package tokenizer

import (
	"strings"
	"sync/atomic"

	"github.com/zeebo/xxh3"
)

// Piece is one part of a text given in parts to EncodePieces.
type Piece struct {
	Text string
	// Key must be XXH3-128(Text) when Keyed: the piece's tokenization is cached under it, so a
	// text that recurs across requests (a chat message's rendered turn replayed by the template
	// cache) is not scanned or hashed again.
	Key   xxh3.Uint128
	Keyed bool
	// Note, when not nil, keeps what EncodePieces derives from a keyed piece (its region's ids,
	// the hashes of its blocks) beside the piece's owner, so a recurring piece costs no cache
	// lookup; without it the segment cache keeps them.
	Note PieceNote
}

// PieceNote is a slot kept beside a recurring piece by its owner (internal/jinja's Note beside a
// recorded chat turn): Store keeps a value and charges its bytes to the owner.
type PieceNote interface {
	Load() any
	Store(v any, bytes int64)
}

// pieceTok is what a keyed piece's note keeps: the piece's region and its ids for one tokenizer,
// and the hashes of the blocks inside the region for one alignment, block size and seed.
type pieceTok struct {
	tok    uint64 // Tokenizer.id: a pointer would keep a replaced tokenizer alive across reloads
	s1, e2 int
	ids    []uint32
	hashes atomic.Pointer[regionHashes]
}

// regionHashes are the hashes of the blocks inside a region whose first block boundary is skip
// tokens in, for one block size and seed.
type regionHashes struct {
	skip, blockSize int
	seed            uint64
	h               []uint64
}

// pieceKeyTag separates the key space of keyed pieces from that of segments in the shared
// SegmentCache (a segment is keyed by the XXH3-128 of its own text).
const pieceKeyTag = 0x5bd1e9955bd1e995

// minKeyedPiece is the shortest keyed piece whose tokenization is cached, in bytes.
const minKeyedPiece = 64

// EncodePieces returns Encode(the pieces' texts joined), without joining the keyed pieces.
//
// How. Encode splits its text at added tokens (leftmost-longest) and encodes the segments
// between them independently. A keyed piece's region from its first added token to the end of
// its last added token whose match cannot depend on text after the piece (no added token extends
// the text from that position on: region below) is encoded once, standalone, and cached under
// the piece's key; the text around regions (a piece's head and tail, unkeyed pieces) forms gaps
// that are encoded as Encode would. The result is Encode's exactly when every region starts at a
// match boundary of the joined text: the gap before it must hold no added token that would run
// into the region (checked at each boundary, straddles); otherwise the piece is taken as gap
// text. Without a segment cache or without added tokens the texts are joined and encoded.
func (t *Tokenizer) EncodePieces(pieces []Piece) []uint32 {
	runs := t.EncodePiecesRuns(pieces).IDs
	if len(runs) == 1 {
		return runs[0]
	}
	n := 0
	for _, r := range runs {
		n += len(r)
	}
	ids := make([]uint32, 0, n)
	for _, r := range runs {
		ids = append(ids, r...)
	}
	return ids
}

// EncodePiecesRuns is EncodePieces without joining its result. A keyed piece's region is a run
// shared with the cache, and the gaps' ids share one new slice. A long conversation's ids are
// then not copied at all (blocks.HashRuns hashes them in place, and reuses the hashes of a
// keyed run's blocks through SegmentCache's block memo).
func (t *Tokenizer) EncodePiecesRuns(pieces []Piece) Runs {
	var runs Runs
	if t.segs == nil || len(t.added.first) == 0 {
		runs.add(t.Encode(joinPieces(pieces)), runSource{})
		return runs
	}
	type step struct {
		gap   string
		inner []uint32 // a region's ids after gap (shared with the cache: only read)
		src   runSource
	}
	steps := make([]step, 0, 2*len(pieces)/3+2)
	var gap gapText
	gapBytes := 0
	for i := range pieces {
		p := &pieces[i]
		if !p.Keyed || len(p.Text) < minKeyedPiece {
			gap.add(p.Text)
			continue
		}
		s1, e2, inner, src := t.pieceRegion(p)
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
		steps = append(steps, step{gap: g, inner: inner, src: src})
		gapBytes += len(g)
		gap.reset("")
		gap.add(p.Text[e2:])
	}
	last := gap.String()
	if len(steps) == 0 {
		runs.add(t.appendWithSegments(nil, last, true), runSource{})
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
	runs = Runs{IDs: make([][]uint32, 0, n), src: make([]runSource, 0, n)}
	from := 0
	for i, st := range steps {
		if ends[i] > from {
			runs.add(own[from:ends[i]], runSource{})
		}
		if len(st.inner) > 0 {
			runs.add(st.inner, st.src)
		}
		from = ends[i]
	}
	if ends[len(steps)] > from || len(runs.IDs) == 0 {
		runs.add(own[from:ends[len(steps)]], runSource{})
	}
	return runs
}

// regionKey is the cache key of a keyed piece's region entry.
func regionKey(pieceKey xxh3.Uint128) xxh3.Uint128 {
	pieceKey.Lo ^= pieceKeyTag
	return pieceKey
}

// pieceRegion returns the region [s1, e2) of a keyed piece, its ids and where they are kept:
// in the piece's note when it has one, else in the segment cache; computed and stored on a
// miss. e2 = 0 means the piece has no region.
func (t *Tokenizer) pieceRegion(p *Piece) (s1, e2 int, inner []uint32, src runSource) {
	key := regionKey(p.Key)
	src = runSource{keyed: true, key: key, note: p.Note}
	if p.Note != nil {
		if pt, ok := p.Note.Load().(*pieceTok); ok && pt.tok == t.id {
			src.pt = pt
			return pt.s1, pt.e2, pt.ids, src
		}
		pt := &pieceTok{tok: t.id}
		pt.s1, pt.e2 = t.added.region(p.Text)
		if pt.e2 > 0 {
			pt.ids = t.appendWithSegments(nil, p.Text[pt.s1:pt.e2], false)
		}
		p.Note.Store(pt, pt.bytes())
		src.pt = pt
		return pt.s1, pt.e2, pt.ids, src
	}
	if v, ok := t.segs.get(key, len(p.Text)); ok && len(v) >= 2 {
		return int(v[0]), int(v[1]), v[2:], src
	}
	s1, e2 = t.added.region(p.Text)
	v := []uint32{uint32(s1), uint32(e2)}
	if e2 > 0 {
		v = t.appendWithSegments(v, p.Text[s1:e2], false)
	}
	t.segs.put(key, len(p.Text), v)
	return s1, e2, v[2:], src
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

func joinPieces(pieces []Piece) string {
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
