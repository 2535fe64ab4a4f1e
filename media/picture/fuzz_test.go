package picture_test

import (
	"os"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/media/picture"
	"github.com/kvroute/kvroute/reason"
)

// FuzzDecodeImage: any bytes give an identity within the size limits, the same one twice, or a
// reason code; a decoder panic (recovered as identity_error) fails the target. Seeds: every
// fixture of testdata/image. `make fuzz` runs it.
func FuzzDecodeImage(f *testing.F) {
	entries, err := os.ReadDir(imageDir)
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		if data, err := os.ReadFile(imageDir + e.Name()); err == nil && len(data) < 64<<10 {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := picture.Decode(data)
		if err != nil {
			switch code := reason.CodeOf(err); code {
			case reason.MediaUndecodable, reason.UnsupportedCodec, reason.FrameTooLarge:
			default:
				t.Fatalf("code %q: %v", code, err)
			}
			if strings.Contains(err.Error(), "panic") {
				t.Fatal(err)
			}
			return
		}
		if got.Width <= 0 || got.Height <= 0 || got.Width > picture.MaxSide || got.Height > picture.MaxSide ||
			got.Width*got.Height > picture.MaxPixels || got.Identity == 0 {
			t.Fatalf("%+v", got)
		}
		again, err := picture.Decode(data)
		if err != nil || *again != *got {
			t.Fatalf("second decode: %+v, %v (first %+v)", again, err, got)
		}
	})
}
