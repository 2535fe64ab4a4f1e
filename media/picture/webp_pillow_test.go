package picture

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"

	"github.com/zeebo/xxh3"
	"golang.org/x/image/webp"

	"github.com/kvroute/kvroute/reason"
)

// pillowGolden is testdata/image/webp_pillow/golden.json (made by make.py there with Debian 12's
// Pillow 9.4.0 over libwebp 1.2.4): for each lossy WebP the SHA-256 of the array Pillow's
// Image.open gives (convert("RGB") bytes when opaque, straight RGBA bytes otherwise).
type pillowGolden struct {
	Pillow  string `json:"pillow"`
	Libwebp string `json:"libwebp"`
	Files   map[string]struct {
		Width, Height, Channels int
		Mode                    string
		SHA256                  string `json:"sha256"`
	} `json:"files"`
}

// TestWebPLossyPillowGolden: kvroute's pixels of every lossy WebP fixture (opaque and with alpha,
// 1×1 to 3840×2160, odd sizes, qualities 50–95, Pillow- and ffmpeg-encoded) hash exactly as
// Pillow's decode does (the worker's pixels), and DecodeImage's identity is the identity of those
// bytes. Before lossy WebP went to libwebp, Go's YCbCr → RGB made every opaque fixture differ.
func TestWebPLossyPillowGolden(t *testing.T) {
	const dir = imageDir + "webp_pillow/"
	raw, err := os.ReadFile(dir + "golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g pillowGolden
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	if g.Libwebp != "1.2.4" || len(g.Files) < 9 {
		t.Fatalf("golden.json: libwebp %q, %d files", g.Libwebp, len(g.Files))
	}
	for name, want := range g.Files {
		data, err := os.ReadFile(dir + name)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := webp.DecodeConfig(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if cfg.Width != want.Width || cfg.Height != want.Height {
			t.Fatalf("%s: header %dx%d, Pillow %dx%d", name, cfg.Width, cfg.Height, want.Width, want.Height)
		}
		px, err := decodePixels(formatWebP, data, cfg.Width, cfg.Height)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ch, flat := flatten(px)
		sum := sha256.Sum256(flat)
		if ch != want.Channels || hex.EncodeToString(sum[:]) != want.SHA256 {
			t.Errorf("%s (%s %dx%d): kvroute %d channels sha256 %x, Pillow %d channels %s",
				name, want.Mode, want.Width, want.Height, ch, sum, want.Channels, want.SHA256)
			continue
		}
		info, err := Decode(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var b bytes.Buffer
		for _, v := range []uint64{3, uint64(cfg.Height), uint64(cfg.Width), uint64(ch)} {
			_ = binary.Write(&b, binary.LittleEndian, v)
		}
		b.WriteByte(0)
		b.Write(flat)
		if uint64(info.Identity) != xxh3.Hash(b.Bytes()) {
			t.Errorf("%s: DecodeImage's identity %s is not the identity of Pillow's pixels", name, info.Identity.Hex())
		}
	}
}

// TestWebPAlphaUnflagged: a lossy WebP whose ALPH chunk the VP8X flags do not announce (the alpha
// fixture with flag 0x10 cleared) is not decoded by libwebp, which would apply the alpha plane,
// while Pillow 9.4 gives that file opaque (checked with python3-pil when this test was written:
// mode RGBA, every alpha 255): Go's decoder keeps its verdict, a 400 media_undecodable.
func TestWebPAlphaUnflagged(t *testing.T) {
	data, err := os.ReadFile(imageDir + "webp_pillow/alpha_333x197_q80.webp")
	if err != nil {
		t.Fatal(err)
	}
	if string(data[12:16]) != "VP8X" || data[20] != 0x10 {
		t.Fatalf("the fixture's first chunk %q flags %#x, want VP8X 0x10", data[12:16], data[20])
	}
	if webpAlphaUnflagged(data) {
		t.Fatal("the fixture itself counts as unflagged")
	}
	data[20] &^= 0x10
	if !webpAlphaUnflagged(data) {
		t.Fatal("an ALPH chunk without the VP8X alpha flag is not noticed")
	}
	if _, err := decodeWebP(data, 333, 197); err == nil {
		t.Fatal("decodeWebP decodes an ALPH chunk the flags do not announce")
	}
	_, err = Decode(data)
	if reason.CodeOf(err) != reason.MediaUndecodable {
		t.Fatalf("DecodeImage: %v, want media_undecodable (Go's verdict)", err)
	}
}
