package registry

import (
	"time"

	"go.uber.org/zap"
)

// conflictWarnEvery is how often a worker id claimed by two live processes is logged again.
const conflictWarnEvery = 5 * time.Minute

// claimLocked decides what a put of rec does to the entry of its worker id (old, when had) at
// time now: it returns the new entry and whether rec is the record in use.
//
// Two processes that publish the record of one worker id (a copied configuration, a second
// bridge for the same engine) overwrite each other's key at every heartbeat; without this the
// worker's endpoint flipped between theirs every few seconds, and each flip looked like a changed
// worker. A record's Instance tells the processes apart: a new instance replaces the record (a
// restart), and the replaced one is remembered (prev). When the replaced instance writes again,
// two live processes claim the id: the first one's record is used again (it was there before),
// the other becomes the rival, its puts are ignored while it keeps writing and the first one
// lives, and the conflict is logged at warn every conflictWarnEvery. When the first process goes
// silent for the TTL its entry expires (sweep), and the rival's next put registers it. Records
// without an instance (older publishers) are used as they come. Lock should be held on entry.
func (w *Watcher) claimLocked(old entry, had bool, rec Worker, now time.Time) (entry, bool) {
	if !had {
		return entry{w: rec, seen: now}, true
	}
	if rec.Instance == "" || old.w.Instance == "" || rec.Instance == old.w.Instance {
		old.w, old.seen = rec, now
		if old.rival != "" && now.Sub(old.rivalSeen) > w.cfg.TTL {
			old.rival = "" // the rival went silent
		}
		return old, true
	}
	switch rec.Instance {
	case old.rival:
		old.rivalSeen = now
		w.warnConflictLocked(&old, rec, now)
		return old, false
	case old.prev:
		// the replaced process is alive: it keeps the id, the newer one is the rival
		rival := old.w
		next := entry{w: rec, seen: now, rival: rival.Instance, rivalSeen: old.seen, warned: old.warned}
		w.warnConflictLocked(&next, rival, now)
		return next, true
	}
	// a new instance: a restart (or a second process, told apart when the first writes again)
	return entry{w: rec, seen: now, prev: old.w.Instance}, true
}

// warnConflictLocked logs that e's worker id is claimed by e's process and by other's, at most
// every conflictWarnEvery.
func (w *Watcher) warnConflictLocked(e *entry, other Worker, now time.Time) {
	if !e.warned.IsZero() && now.Sub(e.warned) < conflictWarnEvery {
		return
	}
	e.warned = now
	w.conflicts.Add(1)
	w.cfg.Logger.Warn("two processes publish the record of one worker id; using the first one's, ignoring the other's until it stops (give each worker its own id)",
		zap.String("worker_id", e.w.WorkerID),
		zap.String("endpoint", e.w.Endpoint), zap.String("instance", e.w.Instance),
		zap.String("ignored_endpoint", other.Endpoint), zap.String("ignored_instance", other.Instance))
}

// Conflicts returns how many times a worker id was found claimed by two live processes (each
// logged warning counts once).
func (w *Watcher) Conflicts() uint64 { return w.conflicts.Load() }
