package bridge

import (
	"sync"

	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/kvevents/normalize"
)

// blockSizeWatch learns a worker's main-attention block size from its KV events: the block_size of
// the first BlockStored that kvevents/normalize's group rule admits and that is dense, the events the
// router indexes. On hybrid models (Qwen3.5: full attention beside Mamba; gpt-oss, Gemma 3: sliding
// window) each KV cache group publishes its own block_size and the engine's cache_config_info can name
// another one (Dynamo #9376, Infera #73), so the events decide. One watch per worker, fed by its ranks.
type blockSizeWatch struct {
	once    sync.Once
	learned chan struct{} // closed when size is set
	size    int
}

func newBlockSizeWatch() *blockSizeWatch { return &blockSizeWatch{learned: make(chan struct{})} }

// done reports whether the size is known (then observe need not be called).
func (w *blockSizeWatch) done() bool {
	select {
	case <-w.learned:
		return true
	default:
		return false
	}
}

// value returns the learned size, or 0 before.
func (w *blockSizeWatch) value() int {
	if !w.done() {
		return 0
	}
	return w.size
}

func (w *blockSizeWatch) set(n int) {
	w.once.Do(func() {
		w.size = n
		close(w.learned)
	})
}

// rankWatch is one rank's view of the watch: its own decoder and group state (group kinds are learned
// per data-parallel rank). Owned by the rank's goroutine.
type rankWatch struct {
	w      *blockSizeWatch
	enc    codec.Encoding
	dec    *codec.Decoder
	groups normalize.GroupFilter
}

// observe reads one forwarded batch until the watch has learned the size. Undecodable batches are
// ignored here (the router counts them).
func (r *rankWatch) observe(payload []byte) {
	if r == nil || r.w.done() {
		return
	}
	if r.dec == nil {
		r.dec = codec.NewDecoder()
	}
	bt, err := r.dec.Decode(r.enc, payload)
	if err != nil {
		return
	}
	for i := range bt.Events {
		ev := &bt.Events[i]
		if ev.Type == codec.AllBlocksCleared || r.groups.Admit(ev) != 0 {
			continue
		}
		if ev.Type == codec.BlockStored && len(ev.TokenIDs) > 0 && normalize.Dense(ev) {
			r.w.set(ev.BlockSize)
			return
		}
	}
}
