package wire

import "testing"

// TestSubjectNames pins the DESIGN.md §2.2 names: they are fixed (version 1).
func TestSubjectNames(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{EventsSubject("w-1"), "kvroute.events.w-1"},
		{ReplaySubject("w-1"), "kvroute.ctl.w-1.replay"},
		{ResetSubject("w-1"), "kvroute.ctl.w-1.reset"},
		{SnapshotSubject("w-1"), "kvroute.ctl.w-1.snapshot"},
		{AllEvents, "kvroute.events.*"},
		{AllResets, "kvroute.ctl.*.reset"},
		{LoadSyncSubject, "kvroute.sync.load"},
		{WorkersBucket, "kvroute_workers"},
		{ResponsesBucket, "kvroute_responses"},
		{HeaderSeq, "Kvroute-Seq"},
		{HeaderEncoding, "Kvroute-Encoding"},
		{HeaderDPRank, "Kvroute-Dp-Rank"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestSubjectWorker(t *testing.T) {
	for _, c := range []struct {
		subject       string
		events, reset string
		isEv, isReset bool
	}{
		{"kvroute.events.w_1", "w_1", "", true, false},
		{"kvroute.ctl.w_1.reset", "", "w_1", false, true},
		{"kvroute.ctl.w_1.replay", "", "", false, false},
		{"kvroute.ctl.reset", "", "", false, false}, // no worker token: never panics
		{"kvroute.sync.load", "", "", false, false},
	} {
		id, ok := EventsWorker(c.subject)
		if ok != c.isEv || id != c.events {
			t.Errorf("EventsWorker(%q) = %q, %v", c.subject, id, ok)
		}
		id, ok = ResetWorker(c.subject)
		if ok != c.isReset || id != c.reset {
			t.Errorf("ResetWorker(%q) = %q, %v", c.subject, id, ok)
		}
	}
}
