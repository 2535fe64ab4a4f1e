package picture

import (
	"encoding/binary"
	"fmt"
	"image"
)

// maxDeflateRatio is deflate's largest expansion: a 258-byte match coded in two bits (one for the
// length symbol, one for the distance) is 1032 output bytes per input byte (zlib's FAQ, "the
// limit is 1032:1"). No zlib stream of n bytes inflates to more than 1032·n.
const maxDeflateRatio = 1032

// checkPlausible refuses, before anything is decoded, an image whose file cannot hold the pixels
// its header announces: an uncompressed BMP shorter than its pixel array, a PNG whose IDAT data
// could not inflate to its rows even at deflate's largest ratio. The decoder would fail on such a
// file anyway, but only after allocating the whole image (a 118-byte BMP claiming 8192×8192 cost
// 256 MiB). Other formats compress without such a bound, or their decoders read as they go; the
// media budget bounds them (decodedBytesPerPixel). nil when the file may hold its pixels.
func checkPlausible(f *imageFormat, data []byte, cfg image.Config) error {
	switch f.name {
	case "BMP":
		return bmpPlausible(data, cfg)
	case "PNG":
		return pngPlausible(data, cfg)
	}
	return nil
}

// bmpPlausible: x/image/bmp decodes only uncompressed pixel arrays (BI_RGB, and BI_BITFIELDS at
// 32 bits): rows of ceil(width·bpp/32)·4 bytes from the offset bfOffBits (BITMAPFILEHEADER
// byte 10), biBitCount at byte 28.
func bmpPlausible(data []byte, cfg image.Config) error {
	if len(data) < 30 {
		return nil // the decoder says what is wrong
	}
	off := int64(binary.LittleEndian.Uint32(data[10:]))
	bpp := int64(binary.LittleEndian.Uint16(data[28:]))
	stride := (int64(cfg.Width)*bpp + 31) / 32 * 4
	if need := off + stride*int64(cfg.Height); int64(len(data)) < need {
		return fmt.Errorf("the file has %d bytes; its %dx%d pixels at %d bits need %d", len(data), cfg.Width, cfg.Height, bpp, need)
	}
	return nil
}

// pngPlausible: the rows of a non-interlaced PNG are height·(1 + ceil(width·channels·depth/8))
// bytes of inflated IDAT data (an interlaced one needs more); the IDAT chunks' lengths (each chunk
// a u32be length, a 4-byte type, the data, a 4-byte CRC, from byte 8) bound what they inflate to.
func pngPlausible(data []byte, cfg image.Config) error {
	if len(data) < 33 {
		return nil
	}
	depth := int64(data[24])
	channels := map[byte]int64{0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[data[25]]
	if channels == 0 || depth == 0 {
		return nil // the decoder says what is wrong
	}
	need := int64(cfg.Height) * (1 + (int64(cfg.Width)*channels*depth+7)/8)
	var idat int64
	for p := 8; p+8 <= len(data); {
		n := int64(binary.BigEndian.Uint32(data[p:]))
		if string(data[p+4:p+8]) == "IDAT" {
			idat += n
		}
		p += 12 + int(min(n, int64(len(data))))
	}
	if idat*maxDeflateRatio < need {
		return fmt.Errorf("its %d bytes of image data cannot inflate to the %d bytes of its %dx%d pixels", idat, need, cfg.Width, cfg.Height)
	}
	return nil
}
