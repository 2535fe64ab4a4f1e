package tokenizer

import "github.com/kvroute/kvroute/internal/jinja"

// Runs is a text's ids in runs: the ids are IDs concatenated in order. Runs are shared (with a
// piece's note, or each other) and only read. A run that is a noted piece's region is the same
// ids wherever and whenever the piece recurs with the same key (Keys).
type Runs struct {
	IDs [][]uint32
	// Keys[i] names run i's ids for a caller that keeps what it derives from them (the router
	// keeps their block hashes in the note): the zero RunKey for a run that is no noted piece's
	// region. Parallel to IDs.
	Keys []RunKey
}

// RunKey names the ids of a noted piece's region: Note is the piece's note, where a caller may
// keep what it derives from the ids under a key of its own (jinja.Note), and the rest, opaque,
// tells apart the ids of two tokenizers (a reload). Two runs with equal keys have equal ids, so a
// value kept with its RunKey is valid for any later run with the same key. It is comparable.
type RunKey struct {
	Note *jinja.Note
	tok  uint64 // Tokenizer.id
}

func (r *Runs) add(ids []uint32, key RunKey) {
	r.IDs = append(r.IDs, ids[:len(ids):len(ids)])
	r.Keys = append(r.Keys, key)
}

func (r *Runs) addRuns(o Runs) {
	r.IDs = append(r.IDs, o.IDs...)
	r.Keys = append(r.Keys, o.Keys...)
}
