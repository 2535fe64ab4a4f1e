package blocks

import (
	"github.com/kvroute/kvroute/kv"
)

// RunMemo keeps the hashes of the blocks wholly inside runs that recur across requests (a
// conversation's earlier turns, encoded by key): HashRuns asks it before hashing a run's inner
// blocks and gives it what it hashed otherwise. run is the run's index; skip is the number of its
// leading tokens that complete the block before it (its first block boundary is skip tokens in);
// the hashes are those of the whole blocks after that boundary. Load reports whether it wrote
// exactly len(dst) hashes.
type RunMemo interface {
	Load(run, skip int, dst []kv.BlockHash) bool
	Store(run, skip int, hashes []kv.BlockHash)
}

// HashRuns is HashBlocks(cfg, seed, tokens, nil) for tokens given as runs (their concatenation in
// order: tokenizer.Tokenizer.EncodePiecesRuns), without joining them: a block inside one run is
// hashed in place, one that spans runs is gathered into a scratch block first. Every block is
// Plain (a text prompt has no media spans). memo, when not nil, supplies and keeps the hashes
// of each run's inner blocks, so a recurring run's tokens are not read at all. runs are only read.
// It also returns the number of tokens. Errors wrap ErrConfig.
func HashRuns(cfg Config, seed uint64, runs [][]uint32, memo RunMemo) ([]kv.BlockHash, int, error) {
	h, err := NewHasher(cfg)
	if err != nil {
		return nil, 0, err
	}
	n := 0
	for _, r := range runs {
		n += len(r)
	}
	bs := cfg.BlockSize
	out := make([]kv.BlockHash, n/bs)
	scratch := make([]uint32, 0, bs)
	b := 0
	for i, r := range runs {
		skip := 0
		if len(scratch) > 0 { // complete the block the previous run started
			skip = min(bs-len(scratch), len(r))
			scratch = append(scratch, r[:skip]...)
			r = r[skip:]
			if len(scratch) < bs {
				continue
			}
			var sum uint64
			sum, h.buf = hashTokensInto(h.buf, scratch, seed)
			out[b], b, scratch = kv.BlockHash(sum), b+1, scratch[:0]
		}
		whole := len(r) / bs
		inner := out[b : b+whole]
		if memo == nil || whole == 0 || !memo.Load(i, skip, inner) {
			h.buf = hashPlainBlocks(inner, r, bs, seed, h.buf)
			if memo != nil && whole > 0 {
				memo.Store(i, skip, inner)
			}
		}
		b += whole
		scratch = append(scratch, r[whole*bs:]...)
	}
	return out, n, nil
}
