package jinja

import (
	"strings"
	"sync/atomic"
	"unsafe"
)

// kvroute addition (README.md, change 5): a render can return its output as pieces, each
// replayed iteration (memo.go) its own piece that shares the recorded text instead of copying it,
// with the recording's note. A 100k-token conversation's prompt is then a list of a few hundred
// string headers instead of a fresh multi-megabyte copy, and routing/tokenizer keeps each
// replayed piece's ids in its note (Tokenizer.EncodePiecesRuns), routing/router the hashes of their
// blocks.

// Piece is one part of a rendered output; the output is the concatenation of its pieces' texts in
// order. It is the one piece type of the prompt-pieces path: routing/chat's Prompt is a []Piece,
// and routing/tokenizer encodes one (Tokenizer.EncodePiecesRuns) without joining it.
type Piece struct {
	// Text is the piece's text. A replayed piece's text is the recorded iteration's and is shared
	// by every render that replays it: it must not be modified (Go strings are not).
	Text string
	// Replayed is true for the output of one loop iteration replayed from a recorded render.
	Replayed bool
	// Note is the recorded iteration's note (nil when not Replayed). A non-nil Note marks text
	// that recurs across renders: the same note always comes with the same text.
	Note *Note
}

// outBuf is an evaluator's output: one growing byte buffer, and, for a render that returns
// pieces (split), the pieces so far. A written piece is a string over its window of the buffer
// (unsafe.String); the buffer is only ever appended to past the windows already handed out (a
// regrowth moves on to a new array and leaves the old one to those strings), so no piece's
// bytes change after it is made. This is how strings.Builder makes its string, one window at a
// time.
type outBuf struct {
	buf    []byte
	from   int // start of the written text not yet in a piece
	pieces []Piece
	n      int  // bytes in pieces
	split  bool // replays (and recordings) become pieces
}

func (o *outBuf) WriteString(s string) { o.buf = append(o.buf, s...) }

// Grow makes room for n more bytes (written out: slices.Grow allocates a temporary of n bytes
// under the race detector, which doubled a long prompt's allocation in race-enabled tests).
func (o *outBuf) Grow(n int) {
	if cap(o.buf)-len(o.buf) >= n {
		return
	}
	nb := make([]byte, len(o.buf), len(o.buf)+n)
	copy(nb, o.buf)
	o.buf = nb
}

// Len is the number of bytes written so far.
func (o *outBuf) Len() int { return o.n + len(o.buf) - o.from }

// since returns the text written since Len() was start. Only text written through WriteString
// after start can be asked for: memo.go records an iteration while it is traced, and a traced
// iteration replays nothing (no piece starts inside it).
func (o *outBuf) since(start int) string { return string(o.buf[o.from+start-o.n:]) }

// truncate drops the text written since Len() was start (as since; the recorded copy of it is
// then written back as a piece).
func (o *outBuf) truncate(start int) { o.buf = o.buf[:o.from+start-o.n] }

// replay writes a recorded iteration's text: as its own piece when split, else copied.
func (o *outBuf) replay(text string, note *Note) {
	if !o.split {
		o.buf = append(o.buf, text...)
		return
	}
	o.flush()
	o.pieces = append(o.pieces, Piece{Text: text, Replayed: true, Note: note})
	o.n += len(text)
}

// flush ends the current written text as a piece (nothing when empty).
func (o *outBuf) flush() {
	if len(o.buf) == o.from {
		return
	}
	s := unsafe.String(&o.buf[o.from], len(o.buf)-o.from)
	o.pieces = append(o.pieces, Piece{Text: s})
	o.n += len(s)
	o.from = len(o.buf)
}

// String returns the whole output (joined when split).
func (o *outBuf) String() string {
	if len(o.pieces) == 0 {
		if len(o.buf) == 0 {
			return ""
		}
		return unsafe.String(&o.buf[0], len(o.buf)) // the buffer is not written after
	}
	var sb strings.Builder
	sb.Grow(o.Len())
	for _, p := range o.pieces {
		sb.WriteString(p.Text)
	}
	sb.Write(o.buf[o.from:])
	return sb.String()
}

// Pieces returns the output as pieces (the text after the last replay is the last piece).
func (o *outBuf) Pieces() []Piece {
	o.flush()
	return o.pieces
}

// Note is kept beside one recorded iteration for values that consumers of the output derive from
// the iteration's text once and keep for as long as the recording lives: routing/tokenizer keeps
// the text's token ids there, routing/router the hashes of the blocks inside them. Each consumer
// has its own slot, named by a NoteKey it made once (NewNoteKey), so no consumer sees another's
// values. The bytes a slot keeps are charged to the recording's owner through the charge
// function given to ShareKeyedCharged. The zero Note is empty and uncharged. Safe for concurrent
// use.
type Note struct {
	slots  [maxNoteKeys]noteSlot
	charge func(bytes int64)
}

// noteSlot is one consumer's value in a Note and the bytes it was charged.
type noteSlot struct {
	v       atomic.Value
	charged atomic.Int64
}

// maxNoteKeys is the number of NoteKeys a program can make: a slot per key is inline in every
// Note, so that a consumer's Load and Store cost one atomic each and allocate nothing.
const maxNoteKeys = 4

// NoteKey names one consumer's slot in every Note. Make it once, at package initialization.
type NoteKey struct{ i int }

var noteKeys atomic.Int32

// NewNoteKey returns a key no other call returned. It panics after maxNoteKeys calls (a program
// has as many consumers of notes as it has packages that keep values there).
func NewNoteKey() NoteKey {
	i := int(noteKeys.Add(1)) - 1
	if i >= maxNoteKeys {
		panic("jinja: more than maxNoteKeys NoteKeys")
	}
	return NoteKey{i}
}

// Load returns the value last stored under key, or nil.
func (n *Note) Load(key NoteKey) any { return n.slots[key.i].v.Load() }

// Store keeps v under key (v always of one concrete type for a given key), replacing what was
// stored under it; bytes is what v keeps. It charges the growth of the slot's bytes over what
// the slot was charged at the store before; a shrink is not refunded.
func (n *Note) Store(key NoteKey, v any, bytes int64) {
	sl := &n.slots[key.i]
	sl.v.Store(v)
	if d := bytes - sl.charged.Swap(bytes); d > 0 && n.charge != nil {
		n.charge(d)
	}
}
