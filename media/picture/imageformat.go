package picture

import (
	"bytes"
	"encoding/binary"
	"errors"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"net/http"

	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"
	"golang.org/x/image/webp"
)

// imageFormat is one image file format recognised by its signature (magic bytes). decode and
// decodeConfig are nil for a format kvroute recognises but does not decode: such an image is
// forwarded unchanged (fallback unsupported_codec), since the worker's PIL may well open it.
type imageFormat struct {
	name         string
	decode       func(io.Reader) (image.Image, error)
	decodeConfig func(io.Reader) (image.Config, error)
}

func (f *imageFormat) decodable() bool { return f.decode != nil }

// The formats kvroute decodes: Go's image/png, image/jpeg, image/gif and golang.org/x/image
// v0.48.0's webp, bmp, tiff (v0.48.0 fixes a TIFF LZW decoder panic; DecodeImage recovers any
// other decoder panic). What each decoder returns, all converted by image/draw's and
// image/color's integer arithmetic (pixels.go), so the conversion is deterministic:
//   - PNG: Gray, Gray16, RGBA, RGBA64, NRGBA, NRGBA64 or Paletted (tRNS alpha in the palette).
//   - JPEG: Gray, YCbCr or CMYK (Adobe inverted CMYK included); arithmetic coding and 12-bit
//     samples are jpeg.UnsupportedError.
//   - GIF: Paletted, the first frame of an animation.
//   - WebP: YCbCr (lossy), NYCbCrA (lossy with an ALPH chunk), NRGBA (lossless). Animated WebP
//     (VP8X animation flag) is not decoded by x/image: sniffed here and forwarded.
//   - BMP: Paletted (1, 2, 4, 8 bits), RGBA (24 bits), NRGBA (32 bits); RLE, 16-bit and
//     bit-field layouts are bmp.ErrUnsupported.
//   - TIFF: Gray, Gray16, Paletted, RGBA, RGBA64, NRGBA or NRGBA64 (the first IFD; none, LZW,
//     PackBits, Deflate, CCITT G3/G4); CMYK or YCbCr photometric and JPEG compression are
//     tiff.UnsupportedError.
var (
	formatPNG  = &imageFormat{"PNG", png.Decode, png.DecodeConfig}
	formatJPEG = &imageFormat{"JPEG", jpeg.Decode, jpeg.DecodeConfig}
	formatGIF  = &imageFormat{"GIF", gif.Decode, gif.DecodeConfig}
	formatWebP = &imageFormat{"WebP", webp.Decode, webp.DecodeConfig}
	formatBMP  = &imageFormat{"BMP", bmp.Decode, bmp.DecodeConfig}
	formatTIFF = &imageFormat{"TIFF", tiff.Decode, tiff.DecodeConfig}
)

// isoImageBrands are the ISO BMFF (HEIF family) brands of still images and image sequences:
// AVIF (avif, avis), HEIC/HEIF (heic, heix, heim, heis, hevc, hevx, mif1, msf1), from the
// HEIF (ISO/IEC 23008-12) and AVIF specifications. An `ftyp` box with one of them as its major or
// a compatible brand is an image file; any other `ftyp` (MP4, MOV) is not.
var isoImageBrands = map[string]string{
	"avif": "AVIF", "avis": "AVIF",
	"heic": "HEIC", "heix": "HEIC", "heim": "HEIC", "heis": "HEIC", "hevc": "HEIC", "hevx": "HEIC",
	"mif1": "HEIF", "msf1": "HEIF",
}

// sniffImage returns the image format data begins with, or nil when it has no known image
// signature. Signatures (from each format's specification, as PIL's plugins check them):
// PNG 89 50 4E 47 0D 0A 1A 0A; JPEG FF D8 FF; GIF "GIF87a"/"GIF89a"; WebP "RIFF" size "WEBP";
// BMP "BM"; TIFF "II*\0"/"MM\0*"; BigTIFF "II+\0"/"MM\0+"; HEIF/AVIF an `ftyp` box with an image
// brand; JPEG 2000 the JP2 signature box or a raw codestream FF 4F FF 51; JPEG XL FF 0A or its
// signature box; ICO/CUR 00 00 01|02 00 with a non-zero count; PSD "8BPS"; QOI "qoif";
// DDS "DDS "; ICNS "icns"; Netpbm "P1"…"P7" followed by whitespace.
func sniffImage(data []byte) *imageFormat {
	has := func(prefix string) bool { return bytes.HasPrefix(data, []byte(prefix)) }
	switch {
	case has("\x89PNG\r\n\x1a\n"):
		return formatPNG
	case has("\xff\xd8\xff"):
		return formatJPEG
	case has("GIF87a"), has("GIF89a"):
		return formatGIF
	case len(data) >= 12 && has("RIFF") && string(data[8:12]) == "WEBP":
		if webpAnimated(data) {
			return &imageFormat{name: "animated WebP"}
		}
		return formatWebP
	case has("BM"):
		return formatBMP
	case has("II*\x00"), has("MM\x00*"):
		return formatTIFF
	case has("II+\x00"), has("MM\x00+"):
		return &imageFormat{name: "BigTIFF"}
	case has("\x00\x00\x00\x0cjP  \r\n\x87\n"), has("\xff\x4f\xff\x51"):
		return &imageFormat{name: "JPEG 2000"}
	case has("\x00\x00\x00\x0cJXL \r\n\x87\n"), has("\xff\x0a"):
		return &imageFormat{name: "JPEG XL"}
	case isoImageBrand(data) != "":
		return &imageFormat{name: isoImageBrand(data)}
	case len(data) >= 22 && (has("\x00\x00\x01\x00") || has("\x00\x00\x02\x00")) && (data[4] != 0 || data[5] != 0) && data[9] == 0:
		return &imageFormat{name: "ICO"} // count ≠ 0 and the first entry's reserved byte 0

	case has("8BPS"):
		return &imageFormat{name: "PSD"}
	case has("qoif"):
		return &imageFormat{name: "QOI"}
	case has("DDS "):
		return &imageFormat{name: "DDS"}
	case has("icns"):
		return &imageFormat{name: "ICNS"}
	case len(data) >= 3 && data[0] == 'P' && data[1] >= '1' && data[1] <= '7' && isSpace(data[2]):
		return &imageFormat{name: "Netpbm"}
	}
	return nil
}

func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

// webpAnimated reports whether a WebP file's first chunk is VP8X with the animation flag set
// (WebP container specification: the flags byte follows the 8-byte chunk header, bit 1).
func webpAnimated(data []byte) bool {
	return len(data) >= 21 && string(data[12:16]) == "VP8X" && data[20]&0x02 != 0
}

// isoImageBrand returns the format name when data begins with an ISO BMFF `ftyp` box whose
// major or compatible brand is an image brand (isoImageBrands), else "".
func isoImageBrand(data []byte) string {
	if len(data) < 16 || string(data[4:8]) != "ftyp" {
		return ""
	}
	size := int(binary.BigEndian.Uint32(data[0:4]))
	if size < 16 || size > len(data) {
		size = min(len(data), 256) // a truncated or oversized box: look at what is there
	}
	if name := isoImageBrands[string(data[8:12])]; name != "" {
		return name
	}
	for off := 16; off+4 <= size; off += 4 { // compatible brands follow the minor version
		if name := isoImageBrands[string(data[off:off+4])]; name != "" {
			return name
		}
	}
	return ""
}

// unsupportedVariant reports whether a decoder error says the file is valid but uses a feature
// the Go decoder lacks (the worker may still open it), rather than that the file is corrupt.
func unsupportedVariant(err error) bool {
	var pngErr png.UnsupportedError
	var jpegErr jpeg.UnsupportedError
	var tiffErr tiff.UnsupportedError
	return errors.As(err, &pngErr) || errors.As(err, &jpegErr) || errors.As(err, &tiffErr) ||
		errors.Is(err, bmp.ErrUnsupported)
}

// describeContent names what bytes without an image signature look like, for the error message:
// net/http's content sniffing (the WHATWG MIME Sniffing algorithm), e.g. "text/html; charset=utf-8".
func describeContent(data []byte) string {
	if len(data) == 0 {
		return "the body is empty"
	}
	return "the bytes sniff as " + http.DetectContentType(data)
}
