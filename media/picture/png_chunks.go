package picture

import "encoding/binary"

// pngChunksAsGo reports whether data's chunk sequence up to IEND passes the structural checks of
// Go's image/png reader (Go 1.27 src/image/png/reader.go, parseChunk, parsePLTE, parsetRNS,
// parseIEND): IHDR first; PLTE once, right after IHDR, of 1..min(256, 2^depth) entries, and not in
// a gray image; tRNS after PLTE in a paletted image (at most 256 entries), after IHDR or PLTE in a
// truecolor one (6 bytes), right after IHDR in a gray one (2 bytes), never with an alpha channel;
// IDAT not before PLTE in a paletted image; IEND only after IDAT, empty. libpng accepts some
// sequences Go refuses (a PLTE after tRNS, say): decodePNG takes libpng's pixels only when this
// holds, so a file is decoded by libpng only if Go's decoder would not refuse it for its chunks
// (its pixels and CRCs libpng checks as strictly, TestPNGLibpngDifferential). Chunk CRCs are
// libpng's to check.
func pngChunksAsGo(data []byte) bool {
	const (
		start = iota
		seenIHDR
		seenPLTE
		seentRNS
		seenIDAT
	)
	stage := start
	var ct, depth byte
	for p := 8; ; {
		if p+12 > len(data) {
			return false
		}
		n := binary.BigEndian.Uint32(data[p:])
		if n > 0x7fffffff || uint64(p)+12+uint64(n) > uint64(len(data)) {
			return false
		}
		typ, body := string(data[p+4:p+8]), data[p+8:p+8+int(n)]
		p += 12 + int(n)
		paletted, gray := ct == 3, ct == 0 || ct == 4
		switch typ {
		case "IHDR":
			if stage != start || n != 13 {
				return false
			}
			depth, ct = body[8], body[9]
			stage = seenIHDR
		case "PLTE":
			if stage != seenIHDR || n%3 != 0 || n == 0 || n/3 > 256 || int(n/3) > 1<<min(depth, 9) || gray {
				return false
			}
			stage = seenPLTE
		case "tRNS":
			switch {
			case paletted && (stage != seenPLTE || n > 256),
				ct == 2 && (stage != seenIHDR && stage != seenPLTE || n != 6),
				ct == 0 && (stage != seenIHDR || n != 2),
				ct == 4 || ct == 6:
				return false
			}
			stage = seentRNS
		case "IDAT":
			if stage < seenIHDR || stage == seenIHDR && paletted {
				return false
			}
			stage = seenIDAT
		case "IEND":
			return stage == seenIDAT && n == 0
		default:
			if stage == start {
				return false
			}
		}
	}
}
