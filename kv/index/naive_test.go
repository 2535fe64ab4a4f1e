package index_test

import (
	"slices"
	"strings"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/kv/index"
)

// naiveIndex is the straightforward map-based index the benchmarks compare against and the randomized
// test uses as the reference: per worker, engine hash → chain key, and chain key → holders count, where
// a chain key hashes the whole path of local hashes from the root. A lookup probes every worker for
// every block.
type naiveIndex struct {
	workers map[index.WorkerKey]*naiveWorker
}

type naiveWorker struct {
	byEngine map[kv.EngineHash]uint64 // engine hash → chain key
	chains   map[uint64]int32         // chain key → number of engine hashes on it
}

func newNaive() *naiveIndex { return &naiveIndex{workers: make(map[index.WorkerKey]*naiveWorker)} }

// chainKey extends a chain key by one local hash (splitmix64 finalizer over a combination).
func chainKey(parent, local uint64) uint64 {
	z := parent*0x9e3779b97f4a7c15 + local + 0x632be59bd9b4e019
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

const rootKey = 0x1234567

func (n *naiveIndex) store(k index.WorkerKey, blocks []index.StoredBlock) error {
	w := n.workers[k]
	if w == nil {
		w = &naiveWorker{byEngine: map[kv.EngineHash]uint64{}, chains: map[uint64]int32{}}
		n.workers[k] = w
	}
	for _, b := range blocks {
		if b.HasParent && b.Parent == b.EngineHash {
			continue
		}
		pk := uint64(rootKey)
		if b.HasParent {
			var ok bool
			if pk, ok = w.byEngine[b.Parent]; !ok {
				return index.ErrUnknownParent
			}
		}
		key := chainKey(pk, uint64(b.LocalHash))
		if old, ok := w.byEngine[b.EngineHash]; ok {
			if old == key {
				continue
			}
			n.removeOne(w, b.EngineHash)
		}
		w.byEngine[b.EngineHash] = key
		w.chains[key]++
	}
	return nil
}

func (n *naiveIndex) removeOne(w *naiveWorker, h kv.EngineHash) {
	key, ok := w.byEngine[h]
	if !ok {
		return
	}
	delete(w.byEngine, h)
	if w.chains[key]--; w.chains[key] == 0 {
		delete(w.chains, key)
	}
}

func (n *naiveIndex) remove(k index.WorkerKey, hashes []kv.EngineHash) {
	if w := n.workers[k]; w != nil {
		for _, h := range hashes {
			n.removeOne(w, h)
		}
	}
}

func (n *naiveIndex) clear(k index.WorkerKey) {
	if w := n.workers[k]; w != nil {
		w.byEngine = map[kv.EngineHash]uint64{}
		w.chains = map[uint64]int32{}
	}
}

func (n *naiveIndex) match(hashes []kv.BlockHash) []index.Overlap {
	keys := make([]uint64, len(hashes))
	k := uint64(rootKey)
	for i, h := range hashes {
		k = chainKey(k, uint64(h))
		keys[i] = k
	}
	var out []index.Overlap
	for wk, w := range n.workers {
		d := 0
		for d < len(keys) && w.chains[keys[d]] > 0 {
			d++
		}
		if d > 0 {
			out = append(out, index.Overlap{Worker: wk, Blocks: d})
		}
	}
	slices.SortFunc(out, func(a, b index.Overlap) int {
		if c := strings.Compare(a.Worker.ID, b.Worker.ID); c != 0 {
			return c
		}
		return a.Worker.DPRank - b.Worker.DPRank
	})
	return out
}
