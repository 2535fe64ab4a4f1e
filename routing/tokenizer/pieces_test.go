package tokenizer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/internal/jinja"
)

// notes gives every distinct text one note, as the template cache gives a recorded turn one.
type notes map[string]*jinja.Note

func (ns notes) of(text string) *jinja.Note {
	n := ns[text]
	if n == nil {
		n = &jinja.Note{}
		ns[text] = n
	}
	return n
}

// encodePieces is EncodePiecesRuns' ids joined: what the tests compare with Encode. It also
// checks the runs' keys: a run is keyed exactly when it is a noted piece's region, the ids kept
// in that piece's note under this tokenizer.
func encodePieces(tb testing.TB, t *Tokenizer, pieces []jinja.Piece) []uint32 {
	tb.Helper()
	runs := t.EncodePiecesRuns(pieces)
	if len(runs.Keys) != len(runs.IDs) {
		tb.Fatalf("%d run keys for %d runs", len(runs.Keys), len(runs.IDs))
	}
	var ids []uint32
	for i, r := range runs.IDs {
		if k := runs.Keys[i]; k != (RunKey{}) {
			pt, _ := k.Note.Load(noteKey).(*pieceTok)
			if k.tok != t.id || pt == nil || pt.tok != t.id || !slices.Equal(pt.ids, r) || len(r) == 0 {
				tb.Fatalf("run %d: key %+v does not name its ids %v (note holds %+v)", i, k, r, pt)
			}
		}
		ids = append(ids, r...)
	}
	return ids
}

// cutPieces splits text into pieces at random byte offsets (some at added-token starts, so
// that regions begin where a chat turn would), gives about three in four of them their note
// (from ns), and returns the pieces.
func cutPieces(rng *rand.Rand, ns notes, text string, marks []string, maxPieces int) []jinja.Piece {
	var cuts []int
	for i := 0; i < rng.IntN(maxPieces); i++ {
		if len(text) == 0 {
			break
		}
		at := rng.IntN(len(text) + 1)
		if rng.IntN(2) == 0 && len(marks) > 0 {
			if k := strings.Index(text[at:], marks[rng.IntN(len(marks))]); k >= 0 {
				at += k
			}
		}
		cuts = append(cuts, at)
	}
	cuts = append(cuts, 0, len(text))
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	var out []jinja.Piece
	for i := 0; i+1 < len(cuts); i++ {
		s := text[cuts[i]:cuts[i+1]]
		p := jinja.Piece{Text: s}
		if rng.IntN(4) != 0 {
			p.Note = ns.of(s)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		out = append(out, jinja.Piece{Text: text})
	}
	return out
}

// TestEncodePiecesGoldens encodes every golden text (corpus, Unicode skew, tokens.jsonl, the
// rendered chat prompts, 1 MB) and every family's vectors as random pieces, three cuts each,
// through one segment cache (so later cuts reuse earlier pieces' regions), and compares with
// the golden ids.
func TestEncodePiecesGoldens(t *testing.T) {
	t.Parallel() // independent: its own tokenizers or the lock-guarded shared ones
	type set struct {
		name  string
		tok   *Tokenizer
		cases []goldenCase
	}
	tok, err := Load(testModelPath)
	if err != nil {
		t.Fatal(err)
	}
	sets := []set{{"qwen3vl-test-model", tok, allGoldenCases(t)}}
	for _, f := range families {
		ft, err := Load(familyDir + f.name + "/tokenizer.json")
		if err != nil {
			t.Fatalf("%v: run `make deps` to fetch the tokenizer files", err)
		}
		sets = append(sets, set{f.name, ft, familyCases(t, f.name)})
	}
	marks := []string{"<|im_start|>", "<|im_end|>", "<|", "<"}
	for _, s := range sets {
		t.Run(s.name, func(t *testing.T) {
			s.tok.SetSegmentCache(NewSegmentCache(DefaultSegmentCacheBytes))
			rng := rand.New(rand.NewPCG(1, 2))
			ns := notes{}
			for _, tc := range s.cases {
				for cut := 0; cut < 3; cut++ {
					pieces := cutPieces(rng, ns, tc.Text, marks, 12)
					if got := encodePieces(t, s.tok, pieces); !slices.Equal(got, tc.IDs) {
						t.Fatalf("%s cut %d (%d pieces): ids differ from the golden ids", tc.Name, cut, len(pieces))
					}
				}
			}
		})
	}
}

// TestEncodePiecesAdversarialTokens checks EncodePiecesRuns against the uncached encoder on random
// texts over added tokens that prefix each other ("<|x|>" and "<|x|><", "<|e|>" and
// "<|e|>\n<|s|>", "\n<|"), so that a match's extent depends on the next piece, a token can
// straddle a cut, and a piece can end inside a token: every place where a region's boundary is
// not where a scan of the joined text puts it.
func TestEncodePiecesAdversarialTokens(t *testing.T) {
	path := tinyJSON(t, false, func(doc map[string]any) {
		added := func(id int, content string) map[string]any {
			return map[string]any{"id": id, "content": content, "single_word": false, "lstrip": false,
				"rstrip": false, "normalized": false, "special": true}
		}
		doc["added_tokens"] = []any{added(300, "<|x|>"), added(301, "<|x|><"), added(302, "<|e|>"),
			added(303, "<|e|>\n<|s|>"), added(304, "<|s|>"), added(305, "\n<|"), added(306, "ab<|x")}
	})
	plain, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	cached, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	c := NewSegmentCache(1 << 20)
	cached.SetSegmentCache(c)
	frags := []string{"a", "b", "c", "ab", " ", "\n", "<", "|", "x", "e", "s", ">", "<|x|>", "<|x|><",
		"<|e|>", "<|s|>", "<|e|>\n", "\n<|", "ab<|x", strings.Repeat("abc ", 20)}
	marks := []string{"<|", "<|e|>", "<|s|>", "\n"}
	rng := rand.New(rand.NewPCG(5, 8))
	ns := notes{}
	// A pool of texts reused as pieces of later texts, as turns recur across requests.
	var pool []string
	for i := 0; i < 4000; i++ {
		var sb strings.Builder
		for j := 0; j < 1+rng.IntN(40); j++ {
			if len(pool) > 0 && rng.IntN(6) == 0 {
				sb.WriteString(pool[rng.IntN(len(pool))])
				continue
			}
			sb.WriteString(frags[rng.IntN(len(frags))])
		}
		text := sb.String()
		want := plain.Encode(text)
		for cut := 0; cut < 3; cut++ {
			pieces := cutPieces(rng, ns, text, marks, 8)
			if got := encodePieces(t, cached, pieces); !slices.Equal(got, want) {
				t.Fatalf("text %q as %d pieces %q: ids %v, want %v", text, len(pieces), pieceTexts(pieces), got, want)
			}
			for _, p := range pieces {
				if len(p.Text) >= minNotedPiece && rng.IntN(3) == 0 {
					pool = append(pool, p.Text)
				}
			}
		}
	}
	reused := 0
	for _, n := range ns {
		if n.Load(noteKey) != nil {
			reused++
		}
	}
	if st := c.Stats(); st.Hits == 0 || reused == 0 {
		t.Fatalf("no segment (%+v) or noted piece (%d) was reused", st, reused)
	}
}

func pieceTexts(ps []jinja.Piece) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Text
	}
	return out
}

// TestEncodePiecesConversation is the case EncodePiecesRuns is for: a chat prompt whose earlier turns
// are keyed pieces (the template cache's replays) and whose new turn is written text. Each turn's
// piece is "<|im_start|>role\n…<|im_end|>\n"; its region ends at "<|im_end|>" and the "\n" after
// it joins the next gap. The ids equal Encode's, and a warm prompt's earlier turns hit.
func TestEncodePiecesConversation(t *testing.T) {
	plain := loadTest(t)
	tok, err := Load(testModelPath)
	if err != nil {
		t.Fatal(err)
	}
	c := NewSegmentCache(DefaultSegmentCacheBytes)
	tok.SetSegmentCache(c)
	turn := func(role string, i int) string {
		return "<|im_start|>" + role + "\n" + strings.Repeat("Turn "+string(rune('a'+i%26))+" says something about routing. ", 20) + "<|im_end|>\n"
	}
	var turns []string
	ns := notes{}
	for i := 0; i < 30; i++ {
		turns = append(turns, turn([]string{"user", "assistant"}[i%2], i))
		var pieces []jinja.Piece
		for _, s := range turns[:len(turns)-1] {
			pieces = append(pieces, jinja.Piece{Text: s, Note: ns.of(s)})
		}
		pieces = append(pieces, jinja.Piece{Text: turns[len(turns)-1] + "<|im_start|>assistant\n"})
		want := plain.Encode(joinPieces(pieces))
		if got := encodePieces(t, tok, pieces); !slices.Equal(got, want) {
			t.Fatalf("turn %d: ids differ from Encode of the joined prompt", i)
		}
	}
	s1, e2 := tok.added.region(turns[3])
	if s1 != 0 || e2 != len(turns[3])-1 {
		t.Errorf("region of a turn: [%d, %d), want [0, %d): up to the final <|im_end|>", s1, e2, len(turns[3])-1)
	}
}

// BenchmarkEncodePiecesConversation is the router's tokenize stage on a long conversation at
// steady state: 160 earlier turns (about 160k tokens) as keyed pieces, the new turn as written
// text. Compare with BenchmarkEncodeConversationJoined, the same prompt joined and encoded
// through the segment cache.
func BenchmarkEncodePiecesConversation(b *testing.B) { benchConversation(b, true) }

// BenchmarkEncodeConversationJoined: see BenchmarkEncodePiecesConversation.
func BenchmarkEncodeConversationJoined(b *testing.B) { benchConversation(b, false) }

func benchConversation(b *testing.B, pieces bool) {
	tok, err := Load(testModelPath)
	if err != nil {
		b.Fatal(err)
	}
	tok.SetSegmentCache(NewSegmentCache(DefaultSegmentCacheBytes))
	words := strings.Fields("the of and to in is was for on that with as by at from his her an which are or be this had not but have they were one all their has more")
	rng := rand.New(rand.NewPCG(9, 9))
	doc := func(n int) string {
		var sb strings.Builder
		for i := 0; i < n; i++ {
			sb.WriteString(words[rng.IntN(len(words))])
			if i%17 == 16 {
				sb.WriteString(".\n")
			} else {
				sb.WriteByte(' ')
			}
		}
		return sb.String()
	}
	var ps []jinja.Piece
	ns := notes{}
	for i := 0; i < 160; i++ {
		s := "<|im_start|>" + []string{"user", "assistant"}[i%2] + "\n" + doc(1000-(i%2)*660) + "<|im_end|>\n"
		ps = append(ps, jinja.Piece{Text: s, Note: ns.of(s)})
	}
	ps = append(ps, jinja.Piece{Text: "<|im_start|>user\n" + doc(1000) + "<|im_end|>\n<|im_start|>assistant\n"})
	joined := joinPieces(ps)
	tok.EncodePiecesRuns(ps)
	tok.Encode(joined)
	b.SetBytes(int64(len(joined)))
	b.ReportAllocs()
	for b.Loop() {
		if pieces {
			tok.EncodePiecesRuns(ps)
		} else {
			tok.Encode(joined)
		}
	}
}
