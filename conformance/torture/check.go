package torture

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/reader"
	"github.com/redokit/redokit/segment"
)

// The rules' names (see the package doc).
const (
	RuleExactlyOnce          = "exactly-once"
	RuleOrder                = "commit-ts-order"
	RuleRowsBeforeDDL        = "rows-before-ddl"
	RuleAltered              = "silently-altered"
	RuleAboveResolved        = "nothing-above-resolved"
	RuleReadShort            = "read-short"
	RuleAckLost              = "acknowledged-lost"
	RuleWatermarkMonotonic   = "watermark-monotonic"
	RuleCheckpointMonotonic  = "checkpoint-monotonic"
	RuleCheckpointLeResolved = "checkpoint-le-resolved"
	RuleGCSafe               = "gc-safe"
	RuleWrongfulFence        = "no-wrongful-fence"
	RuleVerifyClean          = "verify-clean"
	RuleLiveness             = "liveness"
	RuleEpochUnique          = "epoch-unique"
	RuleUncommitted          = "nothing-uncommitted"
)

// Rules are every rule, in the order a report lists them.
var Rules = []string{
	RuleExactlyOnce, RuleOrder, RuleRowsBeforeDDL, RuleAltered, RuleAboveResolved,
	RuleReadShort, RuleAckLost, RuleWatermarkMonotonic, RuleCheckpointMonotonic,
	RuleCheckpointLeResolved, RuleGCSafe, RuleWrongfulFence, RuleVerifyClean, RuleLiveness,
	RuleEpochUnique, RuleUncommitted,
}

// Violation is one broken rule, with what shows it.
type Violation struct {
	Rule     string `json:"rule"`
	Evidence string `json:"evidence"`
}

func (v Violation) String() string { return v.Rule + ": " + v.Evidence }

// Ack is one acknowledged flush, for one span: every event of Span in
// (From, To] was reported durable by the writer's epoch.
type Ack struct {
	Writer string `json:"writer"`
	Epoch  uint64 `json:"epoch"`
	Span   uint64 `json:"span"`
	From   uint64 `json:"from"`
	To     uint64 `json:"to"`
}

// Counts are what a run did.
type Counts struct {
	Steps         int64 `json:"steps"`
	WrittenEvents int64 `json:"written_events"`
	Flushes       int64 `json:"flushes"`        // flushes acknowledged
	FailedFlushes int64 `json:"failed_flushes"` // flushes, closes or writes that failed (the writer was failed over)
	Acks          int64 `json:"acks"`           // acknowledged (span, range) records
	Failovers     int64 `json:"failovers"`      // writer IDs opened again
	Zombies       int64 `json:"zombies"`        // writers abandoned while running
	Kills         int64 `json:"kills"`          // writer processes killed (torture)
	Fences        int64 `json:"fences"`         // writers told they were fenced (rightly)
	Reads         int64 `json:"reads"`          // reads that ended without an error, checked whole
	ReadErrors    int64 `json:"read_errors"`    // reads that ended with an error (checked up to it)
	ReadEvents    int64 `json:"read_events"`
	Ticks         int64 `json:"ticks"`
	TickErrors    int64 `json:"tick_errors"`
	Checkpoints   int64 `json:"checkpoints"` // checkpoints set
	GCRuns        int64 `json:"gc_runs"`
	GCErrors      int64 `json:"gc_errors"` // GC runs that ended with an error (the store lied or failed)
	GCDeleted     int64 `json:"gc_deleted"`
	Opens         int64 `json:"opens"`        // writer epochs opened (each checked for epoch-unique)
	SpansAdded    int64 `json:"spans_added"`  // spans added during the run, each behind a barrier (Config.GrowSpans)
	StaleCaught   int64 `json:"stale_caught"` // operations that ended in an error matching meta.ErrStale: a stale object caught
	// What the writers did with their memory quota (writer.Stats, summed
	// over every epoch; a killed writer process counts up to its last
	// acknowledged flush): stage cuts, the events they staged above the
	// committed ts, and Writes let through over a quota full of a catch-up
	// span's events (which cannot be staged). Config.MemoryQuota forces
	// stage cuts; a run under it that made none did not test staging.
	StageCuts        int64 `json:"stage_cuts"`
	StagedEvents     int64 `json:"staged_events"`
	QuotaOvercommits int64 `json:"quota_overcommits"`
	// Uncommitted counts the events fenced writer epochs hold above their
	// fences' committed ts after the run (reader.Verify's
	// Report.Uncommitted: staged and never committed, or written by a
	// zombie past its fence), which every read must leave out.
	Uncommitted int64 `json:"uncommitted"`
}

// Report is the verdict of a run.
type Report struct {
	// Seed, FinalCheckpoint and FinalResolved are JSON strings of digits,
	// as every ts and seed redokit prints in JSON: they are above 2^53,
	// where a reader of numbers as doubles (jq, JavaScript) rounds them.
	Seed        uint64 `json:"seed,string"`
	Storage     string `json:"storage,omitempty"`
	Mode        string `json:"mode"`
	Counts      Counts `json:"counts"`
	AckedEvents int64  `json:"acked_events"` // acknowledged events above the final checkpoint, all read back
	// AckedUnproven are acknowledged events above the final global
	// resolved ts, which the reader refuses to read (reader.ErrUnproven):
	// not checked.
	AckedUnproven   int64  `json:"acked_unproven,omitempty"`
	FinalCheckpoint uint64 `json:"final_checkpoint_ts,string"` // the meta object's, after the run
	FinalResolved   uint64 `json:"final_resolved_ts,string"`   // the meta object's, after the run
	FinalReadEvents int64  `json:"final_read_events"`          // events the last final read returned
	Faults          string `json:"faults,omitempty"`           // what the Liar did
	// StaleServes counts the reads the Liar's Stale answered with an
	// older version of a metadata object (blobtest.Stale).
	StaleServes int `json:"stale_serves,omitempty"`
	// WriterFaults is what the Liars of writer processes did (torture).
	WriterFaults string `json:"writer_faults,omitempty"`
	// MemoryQuota is the writers' memory quota (Config.MemoryQuota; 0:
	// their default).
	MemoryQuota int64       `json:"memory_quota,omitempty"`
	Violations  []Violation `json:"violations"`
	// Suppressed counts violations beyond the first few of each rule.
	Suppressed int `json:"suppressed,omitempty"`
}

// OK reports whether no rule was broken.
func (r *Report) OK() bool { return len(r.Violations) == 0 }

// BrokenRules returns the names of the broken rules, sorted, each once.
func (r *Report) BrokenRules() []string {
	var out []string
	for _, v := range r.Violations {
		if !slices.Contains(out, v.Rule) {
			out = append(out, v.Rule)
		}
	}
	slices.Sort(out)
	return out
}

// Verdict is a one-line PASS with the counts, or FAIL with the rules.
func (r *Report) Verdict() string {
	c := r.Counts
	if r.OK() {
		unproven := ""
		if r.AckedUnproven > 0 {
			unproven = fmt.Sprintf(" (%d more above the final global resolved ts, which no read may reach)", r.AckedUnproven)
		}
		return fmt.Sprintf("PASS seed %d: %d acknowledged events above the final checkpoint read back exactly once%s; %d flushes acknowledged, %d failed; %d failovers, %d zombies, %d kills; %d reads checked whole (%d events), %d ended in errors; %d GC runs deleted %d segments, %d ended in errors; %s; checkpoint %d, resolved %d",
			r.Seed, r.AckedEvents, unproven, c.Flushes, c.FailedFlushes, c.Failovers, c.Zombies, c.Kills, c.Reads, c.ReadEvents, c.ReadErrors, c.GCRuns, c.GCDeleted, c.GCErrors, r.Staging(), r.FinalCheckpoint, r.FinalResolved)
	}
	return fmt.Sprintf("FAIL seed %d: %s (first: %s)", r.Seed, strings.Join(r.BrokenRules(), ", "), r.Violations[0])
}

// Staging says what the writers staged: stage cuts and staged events,
// writes over the quota, and the events fenced epochs hold above their
// committed ts, which reads left out; under a forced quota
// (Report.MemoryQuota) a run that staged nothing says so.
func (r *Report) Staging() string {
	c := r.Counts
	quota := "default memory quota"
	if r.MemoryQuota > 0 {
		quota = fmt.Sprintf("memory quota %d bytes", r.MemoryQuota)
	}
	s := fmt.Sprintf("%s: %d stage cuts staged %d events, %d writes over the quota, %d events above fenced epochs' committed ts left out",
		quota, c.StageCuts, c.StagedEvents, c.QuotaOvercommits, c.Uncommitted)
	if r.MemoryQuota > 0 && c.StageCuts == 0 {
		s += " (NOTHING STAGED: the quota never filled, staging was not tested)"
	}
	return s
}

// maxPerRule bounds the violations kept per rule.
const maxPerRule = 5

// history is what the checker knows: the acknowledged flushes, the highest
// checkpoint and resolved ts seen, and the violations.
type history struct {
	gen  Gen
	logf func(string, ...any)
	// explain, when set, says where the log holds an event now, for the
	// evidence of a read that lacked it.
	explain func(eventID) string

	mu sync.Mutex
	// starts are the spans and the ts each starts at: every upstream
	// event of a span above its start belongs to the log.
	starts     map[uint64]uint64
	opens      map[string][]uint64 // the epochs each writer ID's opens took, in order
	acks       []Ack
	counts     Counts
	violations []Violation
	perRule    map[string]int
	suppressed int

	// metaMu orders the meta observations, so that one read's answer is
	// compared with those that came before it.
	metaMu   sync.Mutex
	cp, rs   uint64 // the highest checkpoint and resolved ts observed
	cpCeil   uint64 // the highest checkpoint ever set or attempted
	cpCeilMu sync.Mutex
}

func newHistory(gen Gen, spans []uint64, logf func(string, ...any)) *history {
	h := &history{gen: gen, logf: logf, perRule: map[string]int{}, cp: BaseTs, cpCeil: BaseTs,
		starts: map[uint64]uint64{}, opens: map[string][]uint64{}}
	for _, sp := range spans {
		h.starts[sp] = BaseTs
	}
	return h
}

// addSpan makes span part of the log from start on: from now on a read
// whose global resolved ts passes start must hold its events above start.
func (h *history) addSpan(span, start uint64) {
	h.mu.Lock()
	h.starts[span] = start
	h.counts.SpansAdded++
	h.mu.Unlock()
}

// spanStart is the ts span starts at (BaseTs for an unknown one).
func (h *history) spanStart(span uint64) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if st, ok := h.starts[span]; ok {
		return st
	}
	return BaseTs
}

// expected is the index of every upstream event of the log's spans in
// (lo, hi], each span from its start.
func (h *history) expected(lo, hi uint64) index {
	h.mu.Lock()
	starts := maps.Clone(h.starts)
	h.mu.Unlock()
	ix := index{}
	for sp, start := range starts {
		maps.Copy(ix, h.gen.expected([]uint64{sp}, max(lo, start), hi))
	}
	return ix
}

// noteOpen checks the epoch an open of writerID took: above every epoch an
// earlier open of the ID took, and above listedMax, the highest epoch in
// the names of the ID's segments listed just before the open (0: not
// listed).
func (h *history) noteOpen(writerID string, epoch, listedMax uint64) {
	h.mu.Lock()
	prev := slices.Clone(h.opens[writerID])
	h.opens[writerID] = append(h.opens[writerID], epoch)
	h.counts.Opens++
	h.mu.Unlock()
	switch {
	case slices.Contains(prev, epoch):
		h.violate(RuleEpochUnique, "writer %s: an open took epoch %d, which an earlier open of the ID already held (epochs of its opens so far: %v)", writerID, epoch, prev)
	case len(prev) > 0 && epoch < slices.Max(prev):
		h.violate(RuleEpochUnique, "writer %s: an open took epoch %d, below epoch %d an earlier open already held (epochs of its opens so far: %v)", writerID, epoch, slices.Max(prev), prev)
	case epoch <= listedMax:
		h.violate(RuleEpochUnique, "writer %s: an open took epoch %d, yet segments of epoch %d were in the log before it", writerID, epoch, listedMax)
	}
}

// noteErr counts an error that caught a stale metadata object.
func (h *history) noteErr(err error) {
	if err != nil && errors.Is(err, meta.ErrStale) {
		h.count(func(c *Counts) { c.StaleCaught++ })
	}
}

func (h *history) violate(rule, format string, args ...any) {
	v := Violation{Rule: rule, Evidence: fmt.Sprintf(format, args...)}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.perRule[rule]++
	if h.perRule[rule] > maxPerRule {
		h.suppressed++
		return
	}
	h.violations = append(h.violations, v)
	if h.logf != nil {
		h.logf("VIOLATION %s", v)
	}
}

func (h *history) count(f func(c *Counts)) {
	h.mu.Lock()
	f(&h.counts)
	h.mu.Unlock()
}

func (h *history) ack(a Ack) {
	if a.To <= a.From {
		return
	}
	h.mu.Lock()
	h.acks = append(h.acks, a)
	h.counts.Acks++
	h.mu.Unlock()
}

// ackedMax is the highest acknowledged ts of span (BaseTs when none).
func (h *history) ackedMax(span uint64) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := uint64(BaseTs)
	for _, a := range h.acks {
		if a.Span == span {
			m = max(m, a.To)
		}
	}
	return m
}

// noteCheckpoint records a checkpoint about to be set: from now on GC may
// delete below it.
func (h *history) noteCheckpoint(ts uint64) {
	h.cpCeilMu.Lock()
	h.cpCeil = max(h.cpCeil, ts)
	h.cpCeilMu.Unlock()
}

func (h *history) checkpointCeiling() uint64 {
	h.cpCeilMu.Lock()
	defer h.cpCeilMu.Unlock()
	return h.cpCeil
}

// observeMeta compares a meta object's checkpoint and resolved ts with what
// was seen before. The caller holds metaMu across the read and this call.
func (h *history) observeMeta(where string, cp, rs uint64) {
	if rs < h.rs {
		h.violate(RuleWatermarkMonotonic, "%s: the global resolved ts is %d, after %d", where, rs, h.rs)
	}
	if cp < h.cp {
		h.violate(RuleCheckpointMonotonic, "%s: the checkpoint is %d, after %d", where, cp, h.cp)
	}
	if cp > rs {
		h.violate(RuleCheckpointLeResolved, "%s: the checkpoint %d is above the global resolved ts %d", where, cp, rs)
	}
	h.rs, h.cp = max(h.rs, rs), max(h.cp, cp)
	h.noteCheckpoint(cp)
}

// readEvent is one event a read returned.
type readEvent struct {
	payload string
	ts      uint64
	ddl     bool
	key     string // its segment
}

// readRange reads (lo, hi] of logID (hi 0: to the global resolved ts, from
// the meta object) and returns the events up to the first error; io.EOF is
// no error.
func readRange(ctx context.Context, b *blob.Bucket, logID string, lo, hi uint64) ([]readEvent, error) {
	r, err := reader.Open(ctx, b, &reader.Options{LogID: logID, StartTs: lo, EndTs: hi, Lookahead: 1})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out []readEvent
	for {
		ev, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, readEvent{payload: string(ev.Payload()), ts: ev.CommitTs(), ddl: ev.IsDDL(), key: ev.Source.Key})
	}
}

// checkRead checks one read of (lo, hi] that returned evs and ended with
// err. cpEnd is the checkpoint when the read ended: GC may have removed
// what lies at or below it while the read ran. Every upstream event in
// (cpEnd, mustHi] must be there when err is nil (mustHi ≤ hi: the global
// resolved ts the read was bounded by). It returns the IDs read.
func (h *history) checkRead(what string, lo, hi, cpEnd, mustHi uint64, evs []readEvent, err error) map[eventID]bool {
	want := h.expected(lo, hi)
	got := make(map[eventID]bool, len(evs))
	bad := map[string]int{}
	report := func(rule, format string, args ...any) {
		bad[rule]++
		if bad[rule] == 1 {
			h.violate(rule, "%s: "+format, append([]any{what}, args...)...)
		}
	}
	for i, ev := range evs {
		if ev.ts <= lo || ev.ts > hi {
			report(RuleAboveResolved, "returned an event at ts %d (from %s), outside (%d, %d]", ev.ts, ev.key, lo, hi)
			continue
		}
		if i > 0 {
			p := evs[i-1]
			if ev.ts < p.ts {
				report(RuleOrder, "returned ts %d (from %s) after ts %d (from %s)", ev.ts, ev.key, p.ts, p.key)
			} else if ev.ts == p.ts && p.ddl && !ev.ddl {
				report(RuleRowsBeforeDDL, "returned a row at ts %d (from %s) after the DDL of that ts (from %s)", ev.ts, ev.key, p.key)
			}
		}
		id, ok := want[ev.payload]
		if !ok {
			report(RuleAltered, "returned an event at ts %d (from %s) that the upstream never produced (%d bytes)", ev.ts, ev.key, len(ev.payload))
			continue
		}
		if got[id] {
			report(RuleExactlyOnce, "returned %s twice (the second from %s)", id, ev.key)
		}
		got[id] = true
	}
	if err != nil {
		h.noteErr(err)
		h.count(func(c *Counts) { c.ReadErrors++; c.ReadEvents += int64(len(evs)) })
		return got
	}
	h.count(func(c *Counts) { c.Reads++; c.ReadEvents += int64(len(evs)) })
	var missing []eventID
	for _, id := range want {
		if id.ts > cpEnd && id.ts <= mustHi && !got[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		slices.SortFunc(missing, func(a, b eventID) int {
			if a.ts != b.ts {
				return int(a.ts) - int(b.ts)
			}
			return int(a.span) - int(b.span)
		})
		acked := 0
		for _, id := range missing {
			if h.isAcked(id) {
				acked++
			}
		}
		where := ""
		if h.explain != nil {
			where = "; " + h.explain(missing[0])
		}
		h.violate(RuleReadShort, "%s ended without an error but lacks %d events the global resolved ts %d promises (%d of them acknowledged), first %s; it returned %d events%s",
			what, len(missing), mustHi, acked, missing[0], len(evs), where)
	}
	return got
}

// checkCommitted checks the events a read returned against the writer
// states (read after the run): none may come from a fenced epoch above its
// fence's committed ts. Those are staged and never committed, or a
// zombie's written past its fence, and not part of the log; a reader that
// let them through could still pass every other rule, its duplicate filter
// dropping the copies the next owner wrote again.
func (h *history) checkCommitted(what string, states map[string]*meta.WriterState, evs []readEvent) {
	for _, ev := range evs {
		n, err := segment.ParseName(ev.key)
		if err != nil {
			continue
		}
		st := states[n.WriterID]
		if st == nil || n.Epoch >= st.Epoch {
			continue
		}
		for _, f := range st.Fences {
			if f.Epoch == n.Epoch && ev.ts > f.CommittedTs {
				h.violate(RuleUncommitted, "%s: returned an event at ts %d from %s, of writer %s epoch %d, whose fence's committed ts is %d (max ts %d): staged or written past the fence, never committed",
					what, ev.ts, ev.key, n.WriterID, n.Epoch, f.CommittedTs, f.MaxTs)
				return
			}
		}
	}
}

func (h *history) isAcked(id eventID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, a := range h.acks {
		if a.Span == id.span && id.ts > a.From && id.ts <= a.To {
			return true
		}
	}
	return false
}

// ackedAbove returns every acknowledged event above cp, and the highest
// acknowledged ts.
func (h *history) ackedAbove(cp uint64) (map[eventID]bool, uint64) {
	h.mu.Lock()
	acks := slices.Clone(h.acks)
	h.mu.Unlock()
	out := map[eventID]bool{}
	top := uint64(0)
	for _, a := range acks {
		top = max(top, a.To)
		for ts := max(a.From, cp) + 1; ts <= a.To; ts++ {
			for k, ev := range h.gen.Events(a.Span, ts) {
				out[eventID{span: a.Span, ts: ts, k: k, ddl: ev.IsDDL()}] = true
			}
		}
	}
	return out, top
}

func (h *history) report() (Counts, []Violation, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.counts, slices.Clone(h.violations), h.suppressed
}
