package registry

import "sort"

// Merge returns the union of static (declared in the configuration) and live (from the bucket)
// records, sorted by worker id. A static record wins over a live one with the same id: the
// operator's declaration is authoritative. The inputs are not modified.
func Merge(static, live []Worker) []Worker {
	out := make([]Worker, 0, len(static)+len(live))
	seen := make(map[string]struct{}, len(static))
	for _, w := range static {
		if _, dup := seen[w.WorkerID]; dup {
			continue
		}
		seen[w.WorkerID] = struct{}{}
		out = append(out, w)
	}
	for _, w := range live {
		if _, dup := seen[w.WorkerID]; dup {
			continue
		}
		seen[w.WorkerID] = struct{}{}
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].WorkerID < out[j].WorkerID })
	return out
}
