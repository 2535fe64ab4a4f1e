package index

// Arenas are paged so that growing never copies (a copy of a large slice under the write lock would
// stall lookups) and never over-allocates by more than one page; pointers into a page stay valid.
const (
	pageBits = 12
	pageSize = 1 << pageBits
	pageMask = pageSize - 1
)

// arena is a paged slice indexed by int32. Protected by Index.mu like the tree that owns it.
type arena[T any] struct {
	pages [][]T
	n     int32
}

// at returns the element i (which must be below len).
func (a *arena[T]) at(i int32) *T { return &a.pages[i>>pageBits][i&pageMask] }

// grow appends a zero element and returns its index; addedPage reports a new page.
func (a *arena[T]) grow() (i int32, addedPage bool) {
	if int(a.n) == len(a.pages)*pageSize {
		a.pages = append(a.pages, make([]T, pageSize))
		addedPage = true
	}
	a.n++
	return a.n - 1, addedPage
}

// capacity is the number of allocated elements.
func (a *arena[T]) capacity() int { return len(a.pages) * pageSize }

// words returns the stride bitset words of node n.
func (t *tree) words(n int32) []uint64 {
	off := int(n&pageMask) * t.stride
	return t.bits[n>>pageBits][off : off+t.stride : off+t.stride]
}
