package index

import "github.com/kvroute/kvroute/kv"

// engineMap maps a worker's engine hashes to entry indices. It is open addressing with linear probing
// and backward-shift deletion: no tombstones, so the store/remove churn of an event stream keeps probe
// sequences short (Go's map degraded to long probes under that churn in BenchmarkApply). It is split
// into engineTabs tables that grow independently, so no growth copies more than a small part of it
// while the write lock is held. Protected by Index.mu.
type engineMap struct {
	tabs [engineTabs]engineTab
	n    int
}

const (
	engineTabBits = 6
	engineTabs    = 1 << engineTabBits
	engineMinTab  = 8
)

type engineTab struct {
	keys []kv.EngineHash
	// vals holds entry index + 1; 0 marks an empty slot.
	vals []int32
	n    int
}

// mixEngine spreads engine hashes (which need not be random: tests and some engines count) over
// the tables and slots (MurmurHash3's fmix64).
func mixEngine(eh kv.EngineHash) uint64 {
	h := uint64(eh)
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

func (m *engineMap) get(h kv.EngineHash) (int32, bool) {
	x := mixEngine(h)
	t := &m.tabs[x>>(64-engineTabBits)]
	if t.n == 0 {
		return nilIdx, false
	}
	mask := uint64(len(t.vals) - 1)
	for i := x & mask; ; i = (i + 1) & mask {
		v := t.vals[i]
		if v == 0 {
			return nilIdx, false
		}
		if t.keys[i] == h {
			return v - 1, true
		}
	}
}

// put sets h to e (insert or overwrite).
func (m *engineMap) put(h kv.EngineHash, e int32) {
	x := mixEngine(h)
	t := &m.tabs[x>>(64-engineTabBits)]
	if (t.n+1)*4 > len(t.vals)*3 {
		t.grow()
	}
	mask := uint64(len(t.vals) - 1)
	for i := x & mask; ; i = (i + 1) & mask {
		if t.vals[i] == 0 {
			t.keys[i], t.vals[i] = h, e+1
			t.n++
			m.n++
			return
		}
		if t.keys[i] == h {
			t.vals[i] = e + 1
			return
		}
	}
}

func (t *engineTab) grow() {
	size := max(engineMinTab, 2*len(t.vals))
	keys, vals := t.keys, t.vals
	t.keys, t.vals = make([]kv.EngineHash, size), make([]int32, size)
	mask := uint64(size - 1)
	for j, v := range vals {
		if v == 0 {
			continue
		}
		i := mixEngine(keys[j]) & mask
		for t.vals[i] != 0 {
			i = (i + 1) & mask
		}
		t.keys[i], t.vals[i] = keys[j], v
	}
}

// del removes h and reports whether it was present.
func (m *engineMap) del(h kv.EngineHash) bool {
	x := mixEngine(h)
	t := &m.tabs[x>>(64-engineTabBits)]
	if t.n == 0 {
		return false
	}
	mask := uint64(len(t.vals) - 1)
	i := x & mask
	for {
		v := t.vals[i]
		if v == 0 {
			return false
		}
		if t.keys[i] == h {
			break
		}
		i = (i + 1) & mask
	}
	// Backward shift: move later members of the cluster into the hole unless their home slot lies
	// cyclically in (hole, j].
	for j := (i + 1) & mask; t.vals[j] != 0; j = (j + 1) & mask {
		k := mixEngine(t.keys[j]) & mask
		if (i <= j && i < k && k <= j) || (i > j && (i < k || k <= j)) {
			continue
		}
		t.keys[i], t.vals[i] = t.keys[j], t.vals[j]
		i = j
	}
	t.vals[i] = 0
	t.n--
	m.n--
	return true
}

// each calls f for every (hash, entry) pair; f must not modify the map.
func (m *engineMap) each(f func(h kv.EngineHash, e int32)) {
	for ti := range m.tabs {
		t := &m.tabs[ti]
		for j, v := range t.vals {
			if v != 0 {
				f(t.keys[j], v-1)
			}
		}
	}
}

// bytes is the memory held by the tables.
func (m *engineMap) bytes() int64 {
	var b int64
	for ti := range m.tabs {
		b += int64(len(m.tabs[ti].vals)) * 12
	}
	return b
}
