package mediaport

import "errors"

// Key is the affinity key of one media item: XXH3-128 of its encoded bytes (the 16 bytes of
// xxh3.Uint128.Bytes, big-endian Hi then Lo).
type Key [16]byte

// KeyedError is a media error of an item whose bytes were fetched: Key is their hash, so the
// router can keep routing the item's repeats to one worker (affinity) although it did not decode
// it. It unwraps to Err, whose reason code and message it keeps.
type KeyedError struct {
	Key Key
	Err error
}

func (e *KeyedError) Error() string { return e.Err.Error() }
func (e *KeyedError) Unwrap() error { return e.Err }

// KeyOf returns the key of the item err is about, when its bytes were fetched.
func KeyOf(err error) (Key, bool) {
	var k *KeyedError
	if errors.As(err, &k) {
		return k.Key, true
	}
	return Key{}, false
}
