package chat

import (
	"encoding/json"
	"slices"
)

// SpliceUUIDs returns a copy of raw with a "uuid" member added to each part object:
// `,"uuid":"<uuids[i]>"` is inserted right before the closing brace of parts[i] (at
// parts[i].ObjEnd-1), and every other byte is left as it was, so key order, number text and
// whitespace of the client's body survive (DESIGN.md §1 step 6). The member goes last so that,
// under JSON's last-wins rule for duplicate keys, it is the uuid the worker reads. Parts whose
// uuid is "" are skipped, and so are parts marked NoSplice and parts beyond len(uuids). Offsets that do not point at an
// object in raw are skipped too, so a bad caller cannot corrupt the body.
func SpliceUUIDs(raw []byte, parts []MediaPart, uuids []string) []byte {
	type ins struct {
		at   int
		text []byte
	}
	var todo []ins
	extra := 0
	for i, p := range parts {
		if i >= len(uuids) || uuids[i] == "" || p.NoSplice {
			continue
		}
		if p.ObjStart < 0 || p.ObjEnd > len(raw) || p.ObjEnd-p.ObjStart < 2 ||
			raw[p.ObjStart] != '{' || raw[p.ObjEnd-1] != '}' {
			continue
		}
		sep := []byte(`,"uuid":`)
		if isEmptyObject(raw[p.ObjStart:p.ObjEnd]) {
			sep = []byte(`"uuid":`)
		}
		q, err := json.Marshal(uuids[i])
		if err != nil {
			continue
		}
		text := append(sep, q...)
		todo = append(todo, ins{at: p.ObjEnd - 1, text: text})
		extra += len(text)
	}
	slices.SortStableFunc(todo, func(a, b ins) int { return a.at - b.at })
	out := make([]byte, 0, len(raw)+extra)
	last := 0
	for _, t := range todo {
		out = append(out, raw[last:t.at]...)
		out = append(out, t.text...)
		last = t.at
	}
	return append(out, raw[last:]...)
}

// isEmptyObject reports whether obj (from '{' to '}') has only whitespace inside.
func isEmptyObject(obj []byte) bool {
	for _, c := range obj[1 : len(obj)-1] {
		switch c {
		case ' ', '\t', '\n', '\r':
		default:
			return false
		}
	}
	return true
}
