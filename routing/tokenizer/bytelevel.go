package tokenizer

// byteToRune is GPT-2's bytes_to_unicode table (openai/gpt-2 encoder.py, also
// Hugging Face tokenizers pre_tokenizers/byte_level.rs): printable Latin-1
// bytes map to themselves, the other 68 bytes to U+0100.. in byte order.
var byteToRune [256]rune

// runeToByte is the inverse of byteToRune, indexed by rune (all < 0x144);
// -1 for runes outside the byte-level alphabet.
var runeToByte [0x144]int16

func init() {
	for i := range runeToByte {
		runeToByte[i] = -1
	}
	n := rune(0)
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = 256 + n
			n++
		}
		runeToByte[byteToRune[b]] = int16(b)
	}
}
