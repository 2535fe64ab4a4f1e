package index

import (
	"testing"
	"unsafe"
)

// TestEntrySize: Stats counts entrySize bytes per entry; the struct must not outgrow it.
func TestEntrySize(t *testing.T) {
	if got := unsafe.Sizeof(entry{}); got != entrySize {
		t.Fatalf("entry is %d bytes, entrySize says %d", got, entrySize)
	}
}
