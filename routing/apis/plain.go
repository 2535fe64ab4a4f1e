package apis

// plainRun returns how many leading bytes of s are printable ASCII other than '"' and '\':
// bytes a JSON string holds as they are, both when it is read (Parse) and when it is written
// (writeGoString). Eight bytes are tested at a time (a word with a byte below 0x20, a quote, a
// backslash or a high bit set is then looked at byte by byte): an agent's request is mostly
// long plain text, which a byte loop walks at about one byte per nanosecond.
func plainRun[S ~string | ~[]byte](s S) int {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(s); i += 8 {
		x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		q, bs := x^(lo*'"'), x^(lo*'\\')
		// for a word of ASCII bytes: a byte below 0x20 borrows into its high bit; a byte equal
		// to the quote or the backslash is zero after the xor and borrows likewise
		if (x|(x-lo*0x20)|(q-lo)|(bs-lo))&hi != 0 {
			break
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			return i
		}
	}
	return i
}
