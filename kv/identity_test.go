package kv

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

func TestParseHex(t *testing.T) {
	for s, want := range map[string]Identity{
		"0a555750849fa9f6": 0x0a555750849fa9f6,
		"00000000000000ab": 0xab,
		"0A555750849FA9F6": 0x0a555750849fa9f6, // strconv.ParseUint reads upper case, as media.ParseIdentity did
	} {
		if got, err := ParseHex(s); err != nil || got != want {
			t.Errorf("ParseHex(%q) = %#x, %v; want %#x", s, uint64(got), err, uint64(want))
		}
	}
	for _, s := range []string{"", "0a555750849fa9f", "0a555750849fa9fz", "0a555750849fa9f60"} {
		if _, err := ParseHex(s); err == nil {
			t.Errorf("ParseHex(%q): no error", s)
		}
	}
}

func TestIsUUID(t *testing.T) {
	if !IsUUID(Identity(0x00ab00000000000f).UUID()) {
		t.Fatal("IsUUID rejects a UUID")
	}
	if IsUUID("00ab00000000000f") || IsUUID(strings.Repeat("0", 63)+"1") {
		t.Fatal("IsUUID accepts a non-uuid")
	}
}
