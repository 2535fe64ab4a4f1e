package wire

import (
	"fmt"
	"strings"
	"testing"
)

func TestIdentityForms(t *testing.T) {
	for _, v := range []uint64{0, 1, 0xabc, 0x51c22565f5f9c525, 0xffffffffffffffff} {
		id := Identity(v)
		if got, want := id.Hex(), fmt.Sprintf("%016x", v); got != want {
			t.Fatalf("Hex(%#x) = %q, want %q", v, got, want)
		}
		u := id.UUID()
		if want := fmt.Sprintf("%016x", v) + strings.Repeat("0", 48); u != want {
			t.Fatalf("UUID(%#x) = %q, want %q", v, u, want)
		}
		back, ok := ParseUUID(u)
		if !ok || back != id {
			t.Fatalf("ParseUUID(%q) = %#x, %v", u, uint64(back), ok)
		}
	}
}

func TestParseUUIDRejects(t *testing.T) {
	for _, s := range []string{
		"",
		"51c22565f5f9c525", // hex form only
		"51C22565F5F9C525" + strings.Repeat("0", 48), // upper case
		"51c22565f5f9c525" + strings.Repeat("0", 47) + "1",
		"51c22565f5f9c52g" + strings.Repeat("0", 48),
		"51c22565f5f9c525" + strings.Repeat("0", 49),
	} {
		if id, ok := ParseUUID(s); ok {
			t.Fatalf("ParseUUID(%q) = %#x, true; want false", s, uint64(id))
		}
	}
}
