// Package imagetest holds the image fixtures' reader and the crafted images whose header claims
// another size, shared by media/picture's decode tests and routing/mediaresolver's budget tests.
package imagetest

import (
	"bytes"
	"encoding/binary"
	"image"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/image/bmp"
)

// Dir is testdata/image/ of the repository (testdata/SOURCE.md, "image/"), found from this file so
// that a test of any package reads the same fixtures.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "testdata", "image")
}

// Read returns the fixture testdata/image/<name>.
func Read(tb testing.TB, name string) []byte {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(Dir(), name))
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// BMPWithSize is a real 4×4 24-bit BMP (x/image/bmp's encoder) with its header's size rewritten
// to w×h (a negative h: top-down rows).
func BMPWithSize(tb testing.TB, w, h int32) []byte {
	tb.Helper()
	var buf bytes.Buffer
	if err := bmp.Encode(&buf, image.NewRGBA(image.Rect(0, 0, 4, 4))); err != nil {
		tb.Fatal(err)
	}
	b := buf.Bytes()
	binary.LittleEndian.PutUint32(b[18:], uint32(w)) // BITMAPINFOHEADER biWidth, biHeight
	binary.LittleEndian.PutUint32(b[22:], uint32(h))
	return b
}
