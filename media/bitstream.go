package media

// Frame-header parsing of VP8 and VP9 packets, enough to read the coded frame size before the
// packet reaches the decoder (DESIGN.md §6: the coded size is checked on the bitstream, not on the
// container, before any frame buffer exists).
//
// Sources: RFC 6386 §9.1 (VP8 frame tag and key frame start code) and the VP9 Bitstream
// Specification v0.6 §6.2 (uncompressed_header, color_config, frame_size, frame_size_with_refs)
// and Annex B (superframes).

// frameSize is one coded frame size declared in a packet.
type frameSize struct{ w, h int }

// vp8FrameSize returns the size a VP8 key frame declares; ok is false for inter frames and for
// packets too short to hold a key frame header.
func vp8FrameSize(p []byte) (fs frameSize, ok bool) {
	if len(p) < 10 || p[0]&1 != 0 {
		return frameSize{}, false
	}
	if p[3] != 0x9d || p[4] != 0x01 || p[5] != 0x2a {
		return frameSize{}, false
	}
	w := int(uint16(p[6])|uint16(p[7])<<8) & 0x3fff
	h := int(uint16(p[8])|uint16(p[9])<<8) & 0x3fff
	return frameSize{w, h}, true
}

// bitReader reads bits MSB first; reads past the end return zeros and set short.
type bitReader struct {
	b     []byte
	pos   int
	short bool
}

func (r *bitReader) bit() int {
	if r.pos >= len(r.b)*8 {
		r.short = true
		return 0
	}
	v := int(r.b[r.pos>>3]>>(7-uint(r.pos&7))) & 1
	r.pos++
	return v
}

func (r *bitReader) bits(n int) int {
	v := 0
	for i := 0; i < n; i++ {
		v = v<<1 | r.bit()
	}
	return v
}

// vp9Frames splits a VP9 packet into its frames (Annex B superframe index), or returns the packet.
func vp9Frames(p []byte) [][]byte {
	if len(p) == 0 {
		return nil
	}
	m := p[len(p)-1]
	if m&0xe0 == 0xc0 {
		sizeBytes := int(m>>3&3) + 1
		n := int(m&7) + 1
		idx := 2 + sizeBytes*n
		if len(p) >= idx && p[len(p)-idx] == m {
			var out [][]byte
			off := 0
			q := p[len(p)-idx+1:]
			for i := 0; i < n; i++ {
				sz := 0
				for j := 0; j < sizeBytes; j++ {
					sz |= int(q[i*sizeBytes+j]) << (8 * j)
				}
				if sz < 0 || off+sz > len(p)-idx {
					return out
				}
				out = append(out, p[off:off+sz])
				off += sz
			}
			return out
		}
	}
	return [][]byte{p}
}

// vp9FrameSize returns the size one VP9 frame declares explicitly (key frames, intra-only frames and
// inter frames that do not take their size from a reference); ok is false otherwise.
func vp9FrameSize(f []byte) (fs frameSize, ok bool) {
	r := &bitReader{b: f}
	if r.bits(2) != 2 { // frame_marker
		return frameSize{}, false
	}
	profile := r.bit()
	profile |= r.bit() << 1
	if profile == 3 {
		r.bit() // reserved_zero
	}
	if r.bit() == 1 { // show_existing_frame
		return frameSize{}, false
	}
	frameType := r.bit()
	showFrame := r.bit()
	errorRes := r.bit()
	readSize := func() (frameSize, bool) {
		w := r.bits(16) + 1
		h := r.bits(16) + 1
		return frameSize{w, h}, !r.short
	}
	colorConfig := func() {
		if profile >= 2 {
			r.bit() // ten_or_twelve_bit
		}
		if r.bits(3) != 7 { // color_space != CS_RGB
			r.bit() // color_range
			if profile == 1 || profile == 3 {
				r.bits(3) // subsampling_x, subsampling_y, reserved_zero
			}
		} else if profile == 1 || profile == 3 {
			r.bit()
		}
	}
	syncCode := func() bool { return r.bits(24) == 0x498342 }
	if frameType == 0 { // KEY_FRAME
		if !syncCode() {
			return frameSize{}, false
		}
		colorConfig()
		return readSize()
	}
	intraOnly := 0
	if showFrame == 0 {
		intraOnly = r.bit()
	}
	if errorRes == 0 {
		r.bits(2) // reset_frame_context
	}
	if intraOnly == 1 {
		if !syncCode() {
			return frameSize{}, false
		}
		if profile > 0 {
			colorConfig()
		}
		r.bits(8) // refresh_frame_flags
		return readSize()
	}
	r.bits(8) // refresh_frame_flags
	for i := 0; i < 3; i++ {
		r.bits(4) // ref_frame_idx, ref_frame_sign_bias
	}
	for i := 0; i < 3; i++ {
		if r.bit() == 1 { // found_ref: size copied from a reference already checked
			return frameSize{}, false
		}
	}
	return readSize()
}

// packetFrameSizes returns every frame size a packet of codec declares in its headers.
func packetFrameSizes(codec string, p []byte) []frameSize {
	switch codec {
	case "vp8":
		if fs, ok := vp8FrameSize(p); ok {
			return []frameSize{fs}
		}
	case "vp9":
		var out []frameSize
		for _, f := range vp9Frames(p) {
			if fs, ok := vp9FrameSize(f); ok {
				out = append(out, fs)
			}
		}
		return out
	case "av1":
		return av1SequenceSizes(p)
	}
	return nil
}
