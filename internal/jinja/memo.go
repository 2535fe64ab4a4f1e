package jinja

import (
	"fmt"
	"math"
	"slices"
	"sync/atomic"
)

// kvroute addition (README.md, change 4): the output of a for-loop iteration over a shared,
// keyed item (a chat message kept across requests by routing/chat) is recorded with what the
// iteration read from outside itself, and reused by a later render when those reads give the
// same values. A conversation that grows by one turn per request then evaluates only the new
// turn's iterations; the others cost a check of their recorded reads and one copy of their text
// (none when the render returns pieces: output.go).
//
// Why it is exact. An iteration's output is a function of what it reads: its item, the loop
// object's attributes, variables of the enclosing scopes and the attributes of outside dicts
// (a namespace), and the builtins (the engine is deterministic; strftime_now, the one clock,
// is never recorded). While an iteration runs, every name lookup is classified by the scope
// that answers it:
//
//   - internal: a scope made by the iteration, or a name the iteration set in its own scope;
//   - input: the item variable (the memo key: a shared item is never modified) or `loop`;
//   - outside: an enclosing scope; the read is recorded as a dependency (name, found, value);
//   - foreign: a chain that does not pass through the iteration (a macro defined outside);
//     the iteration is then not recorded.
//
// A dependency's value must be comparable across renders: a scalar (compared by value), a
// shared list or dict (by identity: shared values are never modified), or a builtin. Anything
// else (a namespace object, a callable, `loop` passed whole) leaves the iteration unrecorded,
// except through two narrower forms: `name.attr` on the loop object or an outside dict records
// the attribute's value, and an `if` condition that reads only inputs and outside values (no
// internal variable) and calls nothing is recorded as the condition and its truth value, so
// `loop.index0 > ns.last_query_index` stays reusable while the conversation grows. A write to
// an outside variable or namespace, an error, break or continue also leave the iteration
// unrecorded. A later render replays an iteration only when its loop node is the same, the
// item is the same shared dict, and every recorded dependency gives the same value (a
// condition is re-evaluated in the new iteration's scope, before any internal variable exists,
// which is where it read from).
//
// Shared values are read-only: list.append/pop/insert, dict.pop/update and attribute
// assignment on them fail, as they do under transformers' ImmutableSandboxedEnvironment.

// memoReplays and memoRecords count replayed and recorded iterations in this process.
var memoReplays, memoRecords atomic.Uint64

// MemoCounts returns how many loop iterations over keyed dicts were replayed from a recorded
// render and how many were recorded, in this process so far.
func MemoCounts() (replays, records uint64) { return memoReplays.Load(), memoRecords.Load() }

// maxMemoEntries bounds the recorded iterations per item (one per loop node and set of
// dependency values; a chat message normally needs one).
const maxMemoEntries = 2

// memoSlot holds the recorded iterations over one keyed item. Entries are replaced whole
// (copy on write), so concurrent renders read them without a lock.
type memoSlot struct {
	entries atomic.Pointer[[]memoEntry]
	maxOut  int               // longest iteration output recorded, in bytes
	charge  func(bytes int64) // charges what notes keep to the dict's owner (nil: not charged)
	// seen is set by the first iteration over the dict, which then runs untraced (ShareKeyed's
	// deferFirst): a dict seen once (a cold document) costs no trace and no copy of its text;
	// a conversation's turns are recorded on their second request and replayed from their third.
	seen atomic.Bool
}

type memoEntry struct {
	loop *forNode
	deps []memoDep
	out  string
	note *Note // beside the recording, for a consumer of replayed pieces (output.go)
}

type depKind uint8

const (
	depName depKind = iota // an outside variable
	depAttr                // name.attr on an outside dict
	depLoop                // loop.attr of the iteration's own loop
	depCond                // an if condition's truth value
)

type memoDep struct {
	kind    depKind
	name    string // variable (depName, depAttr) or loop attribute (depLoop)
	attr    string // depAttr
	found   bool
	builtin bool // depName answered by the builtins scope
	val     Value
	cond    expr // depCond
	truthy  bool // depCond
	bad     bool // the value is not comparable across renders
}

// iterTrace records one iteration's reads while it runs.
type iterTrace struct {
	root     *scope // the iteration's scope: `loop` and the item variable
	loop     *Dict  // the iteration's loop object
	item     string // the item variable's name
	rootSet  []string
	deps     []memoDep
	internal int  // reads answered inside the iteration
	bad      bool // not recordable
}

// Share marks v and every list and dict reachable from it as shared: read-only, so that one
// converted value may serve many renders (concurrently too). It returns v.
func Share(v Value) Value {
	switch v.kind {
	case KindList:
		l := v.v.(*List)
		if !l.shared {
			l.shared = true
			for _, it := range l.Items {
				Share(it)
			}
		}
	case KindDict:
		d := v.v.(*Dict)
		if !d.shared {
			d.shared = true
			for _, k := range d.Keys {
				Share(d.Data[k])
			}
		}
	}
	return v
}

// ShareKeyed is Share for a dict whose loop iterations are memoized across renders (a chat
// message): the caller promises that the same dict is passed again only for the same content.
// At most two iterations are recorded per dict, each of at most maxOut bytes of output, so the
// memory a keyed dict can hold besides itself is at most 2×maxOut bytes. With deferFirst the
// first iteration over the dict is not recorded (see memoSlot.seen).
func ShareKeyed(v Value, maxOut int, deferFirst bool) Value {
	return ShareKeyedCharged(v, maxOut, deferFirst, nil)
}

// ShareKeyedCharged is ShareKeyed whose recordings' notes (output.go) charge the bytes they keep
// through charge.
func ShareKeyedCharged(v Value, maxOut int, deferFirst bool, charge func(bytes int64)) Value {
	Share(v)
	if v.kind == KindDict {
		d := v.v.(*Dict)
		if d.memo == nil {
			d.memo = &memoSlot{maxOut: maxOut, charge: charge}
			d.memo.seen.Store(!deferFirst)
		}
	}
	return v
}

// MemoBytes is the text held by v's recorded iterations (0 for a value without any).
func MemoBytes(v Value) int {
	if v.kind != KindDict || v.v.(*Dict).memo == nil {
		return 0
	}
	p := v.v.(*Dict).memo.entries.Load()
	if p == nil {
		return 0
	}
	n := 0
	for _, e := range *p {
		n += len(e.out)
	}
	return n
}

func (m *memoSlot) store(loop *forNode, deps []memoDep, out string) memoEntry {
	ent := memoEntry{loop: loop, deps: deps, out: out, note: &Note{charge: m.charge}}
	for {
		old := m.entries.Load()
		var next []memoEntry
		if old != nil {
			next = append(next, *old...)
		}
		if len(next) >= maxMemoEntries {
			next = next[1:]
		}
		next = append(next, ent)
		if m.entries.CompareAndSwap(old, &next) {
			return ent
		}
	}
}

// where a name lookup was answered, relative to the traced iteration.
type where uint8

const (
	whereInternal where = iota
	whereInput
	whereOutside
	whereForeign
)

// resolve looks name up from s and says where the answer came from.
func (t *iterTrace) resolve(s *scope, name string) (Value, bool, where, bool) {
	for c := s; c != nil; c = c.parent {
		if c == t.root {
			if v, ok := c.lookup(name); ok {
				if t.setInRoot(name) {
					return v, true, whereInternal, false
				}
				return v, true, whereInput, false
			}
			v, ok, builtin := lookupFrom(c.parent, name)
			return v, ok, whereOutside, builtin
		}
		if v, ok := c.lookup(name); ok {
			if t.above(c) {
				return v, true, whereInternal, false
			}
			return v, true, whereForeign, false
		}
	}
	return Undefined(), false, whereForeign, false
}

// above reports whether the iteration's scope is c or an ancestor of c.
func (t *iterTrace) above(c *scope) bool {
	for ; c != nil; c = c.parent {
		if c == t.root {
			return true
		}
	}
	return false
}

func (t *iterTrace) setInRoot(name string) bool {
	for _, n := range t.rootSet {
		if n == name {
			return true
		}
	}
	return false
}

// lookupFrom is scope.get that also says whether the builtins scope answered.
func lookupFrom(s *scope, name string) (Value, bool, bool) {
	for c := s; c != nil; c = c.parent {
		if v, ok := c.lookup(name); ok {
			return v, true, c == cachedBuiltins
		}
	}
	return Undefined(), false, false
}

// read records a plain name read (not name.attr).
func (t *iterTrace) read(name string, v Value, found bool, w where, builtin bool) {
	switch w {
	case whereInternal:
		t.internal++
	case whereInput:
		if name != t.item {
			t.bad = true // `loop` itself escapes: its attributes are not tracked from here
		}
	case whereOutside:
		t.addDep(memoDep{kind: depName, name: name, found: found, builtin: builtin, val: v,
			bad: builtin && name == "strftime_now" || !builtin && !comparableDep(v)})
	case whereForeign:
		t.bad = true
	}
}

func (t *iterTrace) addDep(d memoDep) {
	for i := range t.deps {
		o := &t.deps[i]
		if o.kind == d.kind && o.name == d.name && o.attr == d.attr && d.kind != depCond {
			return // the first read stands: an iteration that writes nothing outside reads the same again
		}
	}
	t.deps = append(t.deps, d)
}

func (t *iterTrace) recordable() bool {
	if t.bad {
		return false
	}
	for i := range t.deps {
		if t.deps[i].bad {
			return false
		}
	}
	return true
}

// comparableDep reports whether v can be compared with a later render's value: scalars by value,
// shared containers by identity.
func comparableDep(v Value) bool {
	switch v.kind {
	case KindUndefined, KindNone, KindBool, KindInt, KindFloat, KindString:
		return true
	case KindList:
		return v.v.(*List).shared
	case KindDict:
		return v.v.(*Dict).shared
	}
	return false
}

// sameDep reports whether a and b are the same for a recorded dependency.
func sameDep(a, b Value) bool {
	if a.kind != b.kind {
		return false
	}
	switch a.kind {
	case KindUndefined, KindNone:
		return true
	case KindBool:
		return a.v.(bool) == b.v.(bool)
	case KindInt:
		return a.v.(int64) == b.v.(int64)
	case KindFloat:
		return math.Float64bits(a.v.(float64)) == math.Float64bits(b.v.(float64))
	case KindString:
		return a.v.(string) == b.v.(string)
	case KindList:
		return a.v.(*List) == b.v.(*List)
	case KindDict:
		return a.v.(*Dict) == b.v.(*Dict)
	}
	return false
}

// pureCond reports whether evaluating ex has no effect besides its value: no calls (a
// filter must be a builtin one), so it may be evaluated again to check a recorded condition.
func pureCond(ex expr) bool {
	switch n := ex.(type) {
	case *litExpr, *nameExpr:
		return true
	case *attrExpr:
		return pureCond(n.obj)
	case *itemExpr:
		return pureCond(n.obj) && pureCond(n.key)
	case *unaryExpr:
		return pureCond(n.operand)
	case *binExpr:
		return pureCond(n.left) && pureCond(n.right)
	case *compareExpr:
		for _, o := range n.operands {
			if !pureCond(o) {
				return false
			}
		}
		return true
	case *condExpr:
		return pureCond(n.trueExpr) && pureCond(n.condition) && (n.falseExpr == nil || pureCond(n.falseExpr))
	case *testExpr:
		for _, a := range n.args {
			if !pureCond(a) {
				return false
			}
		}
		return pureCond(n.expr)
	case *filterExpr:
		if _, ok := lookupFilter(cachedBuiltins, n.name); !ok {
			return false
		}
		for _, a := range n.args {
			if !pureCond(a) {
				return false
			}
		}
		for _, k := range n.kwargs {
			if !pureCond(k.value) {
				return false
			}
		}
		return pureCond(n.expr)
	}
	return false
}

// lookup resolves a variable read by the template, recording it when an iteration is traced.
func (e *evaluator) lookup(name string) (Value, bool) {
	t := e.trace
	if t == nil {
		return e.scope.get(name)
	}
	v, ok, w, builtin := t.resolve(e.scope, name)
	t.read(name, v, ok, w, builtin)
	return v, ok
}

// setVar assigns name in the current scope, noting a name the traced iteration sets in its
// own scope (later reads of it are internal).
func (e *evaluator) setVar(name string, val Value) {
	if t := e.trace; t != nil && e.scope == t.root && !t.setInRoot(name) {
		t.rootSet = append(t.rootSet, name)
	}
	e.scope.set(name, val)
}

// tracedAttr evaluates name.attr while an iteration is traced: on the loop object and on an
// outside dict it records the attribute's value instead of the whole object.
func (e *evaluator) tracedAttr(n *attrExpr, name string) (Value, error) {
	t := e.trace
	v, ok, w, builtin := t.resolve(e.scope, name)
	switch {
	case w == whereInput && name == "loop" && v.IsDict() && v.AsDict() == t.loop:
		r, err := e.attrOf(v, n.attr)
		t.addDep(memoDep{kind: depLoop, name: n.attr, val: r, found: true, bad: !comparableDep(r)})
		return r, err
	case w == whereOutside && v.IsDict() && !v.AsDict().shared:
		r, err := e.attrOf(v, n.attr)
		t.addDep(memoDep{kind: depAttr, name: name, attr: n.attr, val: r, found: ok, bad: !comparableDep(r)})
		return r, err
	}
	t.read(name, v, ok, w, builtin)
	return e.attrOf(v, n.attr)
}

// tracedCond evaluates an if condition while an iteration is traced; a pure condition that
// read inputs and outside values only is recorded as its truth value.
func (e *evaluator) tracedCond(cond expr) (Value, error) {
	t := e.trace
	mark, internal, bad := len(t.deps), t.internal, t.bad
	v, err := e.evalExpr(cond)
	if err == nil && !bad && !t.bad && t.internal == internal && len(t.deps) > mark && pureCond(cond) {
		// The replaced reads are cleared, not only cut off: the backing array would otherwise keep
		// their values (the whole messages list of this render) alive in the stored entry.
		clear(t.deps[mark+1:])
		t.deps = append(t.deps[:mark], memoDep{kind: depCond, cond: cond, truthy: v.IsTruthy()})
	}
	return v, err
}

// memoHit returns the recorded output of this iteration when slot holds one for loop n whose
// dependencies give the same values now. child is the iteration's scope (item and loop set).
func (e *evaluator) memoHit(slot *memoSlot, n *forNode, child *scope, ls *loopState) (*memoEntry, bool) {
	p := slot.entries.Load()
	if p == nil {
		return nil, false
	}
	for i := range *p {
		ent := &(*p)[i]
		if ent.loop == n && e.depsHold(ent.deps, child, ls) {
			return ent, true
		}
	}
	return nil, false
}

func (e *evaluator) depsHold(deps []memoDep, child *scope, ls *loopState) bool {
	loop := ls.d
	for i := range deps {
		d := &deps[i]
		if d.kind == depLoop || d.kind == depCond {
			ls.sync() // these read the loop object's attributes of this iteration
		}
		switch d.kind {
		case depName:
			v, ok, builtin := lookupFrom(child.parent, d.name)
			if ok != d.found || builtin != d.builtin || !builtin && !sameDep(v, d.val) {
				return false
			}
		case depAttr:
			v, _, _ := lookupFrom(child.parent, d.name)
			if !v.IsDict() || v.AsDict().shared {
				return false
			}
			r, err := e.attrOf(v, d.attr)
			if err != nil || !sameDep(r, d.val) {
				return false
			}
		case depLoop:
			r, err := e.attrOf(Value{kind: KindDict, v: loop}, d.name)
			if err != nil || !sameDep(r, d.val) {
				return false
			}
		case depCond:
			old := e.scope
			e.scope = child
			v, err := e.evalExpr(d.cond)
			e.scope = old
			if err != nil || v.IsTruthy() != d.truthy {
				return false
			}
		}
	}
	return true
}

// runIteration executes one loop body. When item is a keyed shared dict (and no other
// iteration is being traced) it replays a recorded iteration or records this one. It reports
// whether it replayed (the body did not run, so nothing can have kept child).
func (e *evaluator) runIteration(n *forNode, item Value, child *scope, ls *loopState) (bool, error) {
	var slot *memoSlot
	if e.trace == nil && !n.recursive && n.keyVar == "" && item.IsDict() {
		slot = item.AsDict().memo
	}
	old := e.scope
	e.scope = child
	defer func() { e.scope = old }()
	if slot == nil || !slot.seen.Load() && slot.seen.CompareAndSwap(false, true) {
		ls.sync()
		return false, e.execNodes(n.body)
	}
	if ent, ok := e.memoHit(slot, n, child, ls); ok {
		e.output.replay(ent.out, ent.note)
		memoReplays.Add(1)
		return true, nil
	}
	ls.sync()
	loop := ls.d
	t := &iterTrace{root: child, loop: loop, item: n.valVar}
	e.trace = t
	start := e.output.Len()
	err := e.execNodes(n.body)
	e.trace = nil
	if err == nil && t.recordable() && e.output.Len()-start <= slot.maxOut {
		out := e.output.since(start) // a copy of exact length: no spare array
		ent := slot.store(n, slices.Clone(t.deps), out)
		memoRecords.Add(1)
		if e.output.split {
			// the recorded text becomes its piece now, as a replay of it will be
			e.output.truncate(start)
			e.output.replay(ent.out, ent.note)
		}
	}
	return false, err
}

// errShared is the error of a method that would modify a shared value; Jinja2's sandbox, in
// which transformers renders chat templates, refuses the same calls on any list or dict.
func errShared(method, kind string) error {
	return fmt.Errorf("access to attribute %q of %s object is unsafe (a chat message is read-only)", method, kind)
}
