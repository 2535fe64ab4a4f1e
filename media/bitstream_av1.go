package media

// Sequence-header parsing of AV1, enough to read the largest frame size a stream may code before
// any packet reaches the decoder (DESIGN.md §6: the coded size is checked on the bitstream, before
// any frame buffer exists). Every AV1 frame is at most max_frame_width × max_frame_height of its
// sequence header (frame_size(): frame_width_minus_1 is read in frame_width_bits, or copied from
// the sequence header), so checking the sequence header bounds every frame.
//
// Source: AV1 Bitstream & Decoding Process Specification (2019, with errata) §5.3 (OBU syntax),
// §5.5 (sequence_header_obu, timing_info, decoder_model_info, operating_parameters_info), §4.10.3
// (uvlc), §4.10.5 (leb128); ISO/IEC 14496-15-style av1C box (AV1 Codec ISO Media File Format
// Binding §2.3: 4 header bytes, then configOBUs).

const av1OBUSequenceHeader = 1

// leb128 reads an unsigned LEB128 value of at most 8 bytes; n is 0 when p ends first.
func leb128(p []byte) (v uint64, n int) {
	for i := 0; i < 8 && i < len(p); i++ {
		v |= uint64(p[i]&0x7f) << (7 * i)
		if p[i]&0x80 == 0 {
			return v, i + 1
		}
	}
	return 0, 0
}

// av1SequenceSizes returns the max frame size of every sequence header OBU in p (a temporal unit
// in "low overhead bitstream format", as Matroska, MP4, IVF and av1C store it). OBUs without a size
// field end the scan (the last OBU of a unit).
func av1SequenceSizes(p []byte) []frameSize {
	var out []frameSize
	for len(p) > 0 {
		h := p[0]
		typ := int(h>>3) & 0xf
		ext, hasSize := h&4 != 0, h&2 != 0
		hdr := 1
		if ext {
			hdr = 2
		}
		if len(p) < hdr {
			return out
		}
		var body []byte
		if hasSize {
			sz, n := leb128(p[hdr:])
			if n == 0 || sz > uint64(len(p)-hdr-n) {
				return out
			}
			body = p[hdr+n : hdr+n+int(sz)]
			p = p[hdr+n+int(sz):]
		} else {
			body = p[hdr:]
			p = nil
		}
		if typ == av1OBUSequenceHeader {
			if fs, ok := av1SequenceSize(body); ok {
				out = append(out, fs)
			}
		}
	}
	return out
}

// av1SequenceSize reads max_frame_width_minus_1 + 1 and max_frame_height_minus_1 + 1 of a
// sequence_header_obu body (§5.5.1); ok is false when the body is too short.
func av1SequenceSize(b []byte) (frameSize, bool) {
	r := &bitReader{b: b}
	r.bits(3)         // seq_profile
	r.bit()           // still_picture
	if r.bit() == 1 { // reduced_still_picture_header
		r.bits(5) // seq_level_idx[0]
	} else {
		decoderModel := false
		bufferDelayLen := 0
		if r.bit() == 1 { // timing_info_present_flag
			r.bits(32)        // num_units_in_display_tick
			r.bits(32)        // time_scale
			if r.bit() == 1 { // equal_picture_interval
				r.uvlc() // num_ticks_per_picture_minus_1
			}
			if r.bit() == 1 { // decoder_model_info_present_flag
				decoderModel = true
				bufferDelayLen = r.bits(5) + 1 // buffer_delay_length_minus_1
				r.bits(32)                     // num_units_in_decoding_tick
				r.bits(5)                      // buffer_removal_time_length_minus_1
				r.bits(5)                      // frame_presentation_time_length_minus_1
			}
		}
		initialDisplayDelay := r.bit() == 1
		ops := r.bits(5) + 1 // operating_points_cnt_minus_1
		for i := 0; i < ops && !r.short; i++ {
			r.bits(12)         // operating_point_idc
			if r.bits(5) > 7 { // seq_level_idx
				r.bit() // seq_tier
			}
			if decoderModel && r.bit() == 1 { // decoder_model_present_for_this_op
				r.bits(bufferDelayLen) // decoder_buffer_delay
				r.bits(bufferDelayLen) // encoder_buffer_delay
				r.bit()                // low_delay_mode_flag
			}
			if initialDisplayDelay && r.bit() == 1 { // initial_display_delay_present_for_this_op
				r.bits(4)
			}
		}
	}
	wBits := r.bits(4) + 1
	hBits := r.bits(4) + 1
	w := r.bits(wBits) + 1
	h := r.bits(hBits) + 1
	return frameSize{w, h}, !r.short
}

// uvlc reads a variable length unsigned code (§4.10.3); 32 or more leading zeros give 2^32-1.
func (r *bitReader) uvlc() int {
	lz := 0
	for r.bit() == 0 {
		if r.short {
			return 0
		}
		lz++
	}
	if lz >= 32 {
		return 1<<32 - 1
	}
	return r.bits(lz) + (1 << lz) - 1
}

// av1ConfigSizes returns the sequence header sizes of an av1C record (codec private data of MP4 and
// Matroska): 4 header bytes (marker bit set), then configOBUs.
func av1ConfigSizes(extradata []byte) []frameSize {
	if len(extradata) > 4 && extradata[0]&0x80 != 0 {
		return av1SequenceSizes(extradata[4:])
	}
	return av1SequenceSizes(extradata)
}

// checkExtradataSizes checks the frame sizes the codec's private data declares (an AV1 sequence
// header in av1C) before the decoder is opened. H.264 and HEVC parameter sets are checked by the
// decoder's get_format guard (kv_size_guard) before a picture is allocated.
func checkExtradataSizes(cfg *DecoderConfig, codec string, extradata []byte) error {
	if codec != "av1" {
		return nil
	}
	for _, fs := range av1ConfigSizes(extradata) {
		if err := cfg.checkSize(fs.w, fs.h, "sequence header"); err != nil {
			return err
		}
	}
	return nil
}
