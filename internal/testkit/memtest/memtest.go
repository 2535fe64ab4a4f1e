// Package memtest holds the helpers of the memory-bound tests: the live heap after collection and
// clips that differ per serial number. It imports nothing of kvroute, so any package's internal
// tests may use it. Only tests import it.
package memtest

import (
	"encoding/binary"
	"runtime"
)

// LiveHeap is the heap in use, in bytes (runtime.MemStats.HeapAlloc), after two forced
// collections: the second one frees what the first one's finalizers released.
func LiveHeap() int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// DistinctClip returns a fresh len(base)+pad byte clip: base followed by pad zero bytes whose last
// eight hold serial (little endian). Containers such as WebM ignore the trailing bytes, so every
// serial decodes to the same frames yet has its own content identity, as an attacker varies a clip
// to miss a decode cache.
func DistinctClip(base []byte, pad int, serial uint64) []byte {
	clip := make([]byte, len(base)+pad)
	copy(clip, base)
	binary.LittleEndian.PutUint64(clip[len(clip)-8:], serial)
	return clip
}
