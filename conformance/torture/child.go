package torture

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/blobtest"
	"github.com/redokit/redokit/internal/retry"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/writer"
)

// ChildConfig configures one writer process of a run whose writers are
// processes (redokit torture): it owns one writer ID and fixed spans, and
// may be killed at any moment.
type ChildConfig struct {
	// Bucket is the storage under test (through the child's own Liar);
	// Clean the same storage without faults, for the checkpoint and the
	// proof of a fence.
	Bucket, Clean *blob.Bucket
	LogID         string
	Seed          uint64
	WriterID      string
	Spans         []uint64
	// History is the file each acknowledged flush is appended to, synced
	// before the next one is made.
	History *os.File
	// The upstream's clock is shared by every process: ts BaseTs+n is
	// reached at Start + n × TsEvery.
	Start   time.Time
	TsEvery time.Duration
	// FlushEvery is the pause between flushes (default 10 ms).
	FlushEvery time.Duration
	// MemoryQuota is the writer's memory quota (Config.MemoryQuota; 0: the
	// default). With it, now and then one span of the writer lags for a
	// few rounds (its events written, its resolved ts left behind), as in
	// the in-process workload, so that the writer stages.
	MemoryQuota int64
	// Liar, when set, is the Liar under Bucket: what it did so far goes
	// into the history every few flushes (a killed process says nothing
	// at its end). Incarnation tells this process's lines from those of
	// the writer ID's earlier processes.
	Liar        *blobtest.Liar
	Incarnation int
}

// HistoryLine is one line of a child's history file.
type HistoryLine struct {
	Kind     string   `json:"kind"` // "ack", "open", "violation" or "faults"
	Writer   string   `json:"writer,omitempty"`
	Epoch    uint64   `json:"epoch,omitempty"`
	Spans    []uint64 `json:"spans,omitempty"`
	From     uint64   `json:"from,omitempty"`
	To       uint64   `json:"to,omitempty"`
	Rule     string   `json:"rule,omitempty"`
	Evidence string   `json:"evidence,omitempty"`
	// Kind "faults": what the process's Liar did so far, by
	// "<kind>/<action>" (see blobtest.Liar.Counts).
	Incarnation int            `json:"incarnation,omitempty"`
	Faults      map[string]int `json:"faults,omitempty"`
	// Kind "ack": what the writer did with its memory quota so far
	// (writer.Stats: StageCuts, StagedEvents, QuotaOvercommits).
	StageCuts        int64 `json:"stage_cuts,omitempty"`
	StagedEvents     int64 `json:"staged_events,omitempty"`
	QuotaOvercommits int64 `json:"quota_overcommits,omitempty"`
}

// History is what the children of a run left in their history files.
type History struct {
	Acks       []Ack
	Violations []Violation
	// Opens are the epochs the processes' opens took, in the order each
	// writer ID's processes wrote them (kind "open": Writer, Epoch).
	Opens []Open
	// Faults add up, over every process, the last counts it wrote.
	Faults map[string]int
	// StageCuts, StagedEvents and QuotaOvercommits add up, over every
	// writer epoch (one per process), the last counts its acks carried.
	StageCuts, StagedEvents, QuotaOvercommits int64
}

// Open is one open of a writer ID: the epoch it took.
type Open struct {
	Writer string
	Epoch  uint64
}

// ErrChildFenced is what RunChild returns when its writer was fenced (by
// a proven newer epoch or, a violation it recorded, wrongly).
var ErrChildFenced = errors.New("torture: the writer was fenced")

// RunChild opens a new epoch of the writer ID, takes its spans on from the
// log's checkpoint, and writes the upstream as the shared clock reaches it,
// flushing all the time and appending every acknowledged flush to the
// history, until ctx ends (it then closes the writer) or the writer fails
// (it returns the error; the parent starts another process).
func RunChild(ctx context.Context, c ChildConfig) error {
	if c.FlushEvery <= 0 {
		c.FlushEvery = 10 * time.Millisecond
	}
	if c.TsEvery <= 0 {
		c.TsEvery = 2 * time.Millisecond
	}
	gen := Gen{Seed: c.Seed}
	var start uint64
	var w *writer.Writer
	var lastErr error
	for attempt := 0; ; attempt++ {
		if attempt == 50 {
			return fmt.Errorf("torture: writer %s: could not open in 50 attempts: %w", c.WriterID, lastErr)
		}
		if attempt > 0 {
			if err := retry.Sleep(ctx, time.Duration(attempt)*time.Millisecond); err != nil {
				return err
			}
		}
		m, _, err := meta.ReadMeta(ctx, c.Clean, c.LogID)
		if err != nil {
			lastErr = err
			continue
		}
		start = max(m.CheckpointTs, BaseTs)
		w, err = writer.Open(blobtest.WithTakeover(ctx), c.Bucket, withQuota(WriterOptions(c.LogID, c.WriterID), c.MemoryQuota))
		if err != nil {
			lastErr = err
			continue
		}
		break
	}
	epoch := w.Epoch()
	if err := WriteHistoryLine(c.History, HistoryLine{Kind: "open", Writer: c.WriterID, Epoch: epoch}); err != nil {
		return err
	}
	fail := func(op string, err error) error {
		if errors.Is(err, meta.ErrFenced) {
			st, _, rerr := meta.ReadWriterState(context.WithoutCancel(ctx), c.Clean, c.LogID, c.WriterID)
			if rerr == nil && st.Epoch <= epoch {
				WriteHistoryLine(c.History, HistoryLine{Kind: "violation", Rule: RuleWrongfulFence,
					Evidence: fmt.Sprintf("writer %s epoch %d (pid %d): %s reported %v, but its state object holds epoch %d: no newer epoch exists", c.WriterID, epoch, os.Getpid(), op, err, st.Epoch)})
			}
			return fmt.Errorf("%w: %s: %v", ErrChildFenced, op, err)
		}
		return fmt.Errorf("torture: writer %s epoch %d: %s: %w", c.WriterID, epoch, op, err)
	}
	for _, sp := range c.Spans {
		if err := w.AddSpan(writer.SpanID(sp), start); err != nil {
			return fail("add span", err)
		}
	}
	acks := 0
	ack := func(f uint64) error {
		if f <= start {
			return nil
		}
		st := w.Stats()
		if err := WriteHistoryLine(c.History, HistoryLine{Kind: "ack", Writer: c.WriterID, Epoch: epoch, Spans: c.Spans, From: start, To: f,
			StageCuts: st.StageCuts, StagedEvents: st.StagedEvents, QuotaOvercommits: st.QuotaOvercommits}); err != nil {
			return err
		}
		if acks++; c.Liar != nil && acks%10 == 1 {
			return WriteHistoryLine(c.History, HistoryLine{Kind: "faults", Writer: c.WriterID, Incarnation: c.Incarnation, Faults: c.Liar.Counts()})
		}
		return nil
	}
	pos := start
	// A span held back (MemoryQuota): written to, not resolved, for the
	// rounds left.
	r := rand.New(rand.NewPCG(c.Seed^uint64(c.Incarnation), idHash(c.WriterID)))
	var lagging uint64
	lagLeft := 0
	for {
		if ctx.Err() != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if lagLeft > 0 {
				w.AdvanceResolved(writer.SpanID(lagging), pos) // an error shows in Close
			}
			if err := w.Close(cctx); err != nil {
				return fail("close", err)
			}
			return ack(w.FlushedTs())
		}
		target := BaseTs + uint64(time.Since(c.Start)/c.TsEvery)
		if target > pos {
			if lagLeft > 0 {
				lagLeft--
			} else if c.MemoryQuota > 0 && r.IntN(8) == 0 {
				lagging, lagLeft = c.Spans[r.IntN(len(c.Spans))], 2+r.IntN(6)
			}
			for _, sp := range c.Spans {
				for ts := pos + 1; ts <= target; ts++ {
					if evs := gen.Events(sp, ts); len(evs) > 0 {
						if err := w.Write(ctx, writer.SpanID(sp), evs...); err != nil {
							return fail("write", err)
						}
					}
				}
				if lagLeft > 0 && sp == lagging {
					continue
				}
				if err := w.AdvanceResolved(writer.SpanID(sp), target); err != nil {
					return fail("advance", err)
				}
			}
			pos = target
		}
		f, err := w.Flush(ctx)
		if err != nil {
			if ctx.Err() != nil {
				continue
			}
			return fail("flush", err)
		}
		if err := ack(f); err != nil {
			return err
		}
		_ = retry.Sleep(ctx, c.FlushEvery)
	}
}

// idHash hashes a writer ID into a seed.
func idHash(id string) uint64 {
	h := uint64(0x1d)
	for i := 0; i < len(id); i++ {
		h = mix(h ^ uint64(id[i]))
	}
	return h
}

// WriteHistoryLine appends a line to the history and syncs it: once it returns,
// the acknowledgement survives the process.
func WriteHistoryLine(f *os.File, l HistoryLine) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("torture: history %s: %w", f.Name(), err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("torture: history %s: %w", f.Name(), err)
	}
	return nil
}

// ReadHistory reads the history files of a run's children: their
// acknowledged flushes, as Acks, the violations they recorded, and what
// their Liars did. A torn last line of a file (its process was killed while
// writing it) was never acknowledged and is ignored; a torn line anywhere
// else is an error naming the file.
func ReadHistory(files ...string) (*History, error) {
	h := &History{Faults: map[string]int{}}
	last := map[string]map[string]int{} // writer/incarnation → its last fault counts
	stats := map[Open]HistoryLine{}     // writer epoch → its last ack
	for _, name := range files {
		f, err := os.Open(name)
		if errors.Is(err, os.ErrNotExist) {
			continue // the writer never acknowledged anything
		}
		if err != nil {
			return nil, err
		}
		err = readHistory(f, h, last, stats)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	for _, counts := range last {
		for k, v := range counts {
			h.Faults[k] += v
		}
	}
	for _, l := range stats {
		h.StageCuts += l.StageCuts
		h.StagedEvents += l.StagedEvents
		h.QuotaOvercommits += l.QuotaOvercommits
	}
	return h, nil
}

func readHistory(r io.Reader, h *History, last map[string]map[string]int, stats map[Open]HistoryLine) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var bad error
	for n := 1; sc.Scan(); n++ {
		if bad != nil {
			return bad
		}
		var l HistoryLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			bad = fmt.Errorf("torture: history line %d: %w", n, err)
			continue
		}
		switch l.Kind {
		case "ack":
			for _, sp := range l.Spans {
				h.Acks = append(h.Acks, Ack{Writer: l.Writer, Epoch: l.Epoch, Span: sp, From: l.From, To: l.To})
			}
			stats[Open{l.Writer, l.Epoch}] = l
		case "open":
			h.Opens = append(h.Opens, Open{Writer: l.Writer, Epoch: l.Epoch})
		case "violation":
			h.Violations = append(h.Violations, Violation{Rule: l.Rule, Evidence: l.Evidence})
		case "faults":
			last[fmt.Sprintf("%s/%d", l.Writer, l.Incarnation)] = l.Faults
		default:
			return fmt.Errorf("torture: history line %d: unknown kind %q", n, l.Kind)
		}
	}
	return sc.Err()
}
