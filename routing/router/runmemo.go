package router

import (
	"github.com/kvroute/kvroute/internal/jinja"
	"github.com/kvroute/kvroute/kv"
	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/routing/tokenizer"
)

// HashTextRuns returns the block hashes of a text prompt's ids given as runs
// (model.Model.EncodePromptRuns) and the number of ids: blocks.HashRuns(cfg, seed, runs.IDs, memo)
// with the router's block memo, which keeps the hashes of the blocks inside a keyed run (a chat
// turn the template cache replayed) in the run's note and reuses them when the run recurs at the
// same alignment, block size and seed (runMemo). The hashes are those of HashBlocks over the
// joined ids. Errors are HashRuns'.
func HashTextRuns(cfg blocks.Config, seed uint64, runs tokenizer.Runs) ([]kv.BlockHash, int, error) {
	return blocks.HashRuns(cfg, seed, runs.IDs, &runMemo{keys: runs.Keys, blockSize: cfg.BlockSize, seed: seed})
}

// runMemo is the blocks.RunMemo of one request's runs (tokenizer.Runs): the hashes of the blocks
// inside a keyed run (a chat turn the template cache replayed; its ids are the same whenever its
// key recurs) are kept in the run's note (jinja.Note, under blockMemoKey), for one alignment,
// block size and seed: the last one hashed. A conversation's turns recur at the same offsets
// request after request, so one entry per turn is what is reused; another alignment, block size
// or seed (a cache_salt) replaces it.
type runMemo struct {
	keys      []tokenizer.RunKey // parallel to the runs
	blockSize int
	seed      uint64
}

// blockMemoKey is the router's slot in a piece's note.
var blockMemoKey = jinja.NewNoteKey()

// blockMemo is what the router keeps in a note: the hashes of the blocks inside the run of key
// whose first block boundary is skip tokens in, for blockSize and seed.
type blockMemo struct {
	key       tokenizer.RunKey
	skip      int
	blockSize int
	seed      uint64
	hashes    []kv.BlockHash
}

// blockMemoOverhead approximates the bytes a note's block memo costs besides its hashes.
const blockMemoOverhead = 48

func (m *runMemo) Load(run, skip int, dst []kv.BlockHash) bool {
	k := m.keys[run]
	if k.Note == nil {
		return false
	}
	bm, _ := k.Note.Load(blockMemoKey).(*blockMemo)
	if bm == nil || bm.key != k || bm.skip != skip || bm.blockSize != m.blockSize || bm.seed != m.seed || len(bm.hashes) != len(dst) {
		return false
	}
	copy(dst, bm.hashes)
	return true
}

func (m *runMemo) Store(run, skip int, hashes []kv.BlockHash) {
	k := m.keys[run]
	if k.Note == nil || len(hashes) == 0 {
		return
	}
	bm := &blockMemo{key: k, skip: skip, blockSize: m.blockSize, seed: m.seed, hashes: append([]kv.BlockHash(nil), hashes...)}
	k.Note.Store(blockMemoKey, bm, int64(8*len(hashes))+blockMemoOverhead)
}
