package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/redokit/redokit"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/meta"
)

// defaultStaleAfter is the coordinator's default StaleAfter: a writer whose
// state object is older than this is reported stale.
const defaultStaleAfter = 30 * time.Second

func (a *app) metaCmd() *cobra.Command {
	var staleAfter time.Duration
	cmd := &cobra.Command{
		Use:   "meta",
		Short: "Print the log's checkpoint ts, global resolved ts, writers and epochs",
		Long: `meta prints the log's meta object — the checkpoint ts (how far the downstream
has applied), the global resolved ts (how far the log is complete) — and the state
of every writer: live or removed, epoch, flushed resolved ts, last published
segment seq, and the fences its earlier epochs left (a zombie's segments above a
fence are ignored by readers).

Each writer's AGE is how long ago its state object was last written; a writer
older than --stale-after (default 30s, the coordinator's StaleAfter) is STALE:
it stopped publishing, which a dead process does ('redokit writer' shows what
to do about it).`,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{annStorage: "1", annLog: "1"},
		RunE: a.onBucket(func(cmd *cobra.Command, b *blob.Bucket) error {
			ctx := cmd.Context()
			if staleAfter <= 0 {
				return usageErrorf("--stale-after %v: must be positive", staleAfter)
			}
			info, err := a.readLogInfo(ctx, b, staleAfter)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(info)
			}
			a.printMeta(info)
			return nil
		}),
	}
	cmd.Flags().DurationVar(&staleAfter, "stale-after", defaultStaleAfter, "a writer whose state object is older than this is stale")
	return cmd
}

// writerInfo is one writer as meta shows it.
type writerInfo struct {
	WriterID  string      `json:"writer"`
	Live      bool        `json:"live"`
	Epoch     uint64      `json:"epoch"`
	FlushedTs uint64      `json:"flushed_ts,string"`
	Seq       uint64      `json:"seq"`
	HasSeq    bool        `json:"has_seq"`
	Fences    []fenceJSON `json:"fences,omitempty"`
	Spans     int         `json:"spans,omitempty"`
	Owner     string      `json:"owner,omitempty"`
	Updated   time.Time   `json:"updated"`
	// AgeSeconds is how long ago the state object was written (now −
	// Updated); Stale: longer ago than --stale-after (or no state object).
	AgeSeconds float64 `json:"age_seconds"`
	Stale      bool    `json:"stale"`
	// MetaEpoch is the epoch the coordinator last saw; 0 when it is not live.
	MetaEpoch uint64 `json:"meta_epoch,omitempty"`
	// NoState: the meta object names the writer but it has no state object.
	NoState bool `json:"no_state,omitempty"`
}

// logInfo is what meta prints. Its ts are JSON strings (see jsonts.go).
type logInfo struct {
	LogID        string        `json:"log"`
	Storage      string        `json:"storage"`
	CheckpointTs uint64        `json:"checkpoint_ts,string"`
	ResolvedTs   uint64        `json:"resolved_ts,string"`
	Updated      time.Time     `json:"updated"`
	Spans        spanTs        `json:"spans,omitempty"`
	Barriers     []barrierJSON `json:"barriers,omitempty"`
	// StaleAfterSeconds is the --stale-after threshold of the writers' Stale.
	StaleAfterSeconds float64      `json:"stale_after_seconds"`
	Writers           []writerInfo `json:"writers"`

	m      *meta.Meta
	states map[string]*meta.WriterState
}

// readMeta reads the log's meta object, turning "missing" into an error that
// says which log and where.
func (a *app) readMeta(ctx context.Context, b *blob.Bucket) (*meta.Meta, error) {
	log := a.log(b)
	m, err := log.Meta(ctx)
	if errors.Is(err, redokit.ErrNoLog) {
		return nil, fmt.Errorf("no log %q in %s: its meta object %s does not exist (check --log and --storage)", a.logID, a.storageShown(), log.MetaKey())
	}
	if err != nil {
		return nil, fmt.Errorf("read the meta object of log %q: %w", a.logID, err)
	}
	return m, nil
}

// openMeta opens --storage and reads the meta object of --log: what a
// command on an existing log starts with. The caller closes the bucket.
func (a *app) openMeta(ctx context.Context) (*blob.Bucket, *meta.Meta, error) {
	b, err := a.open(ctx)
	if err != nil {
		return nil, nil, err
	}
	m, err := a.readMeta(ctx, b)
	if err != nil {
		b.Close()
		return nil, nil, err
	}
	return b, m, nil
}

// onBucket is the RunE of a command on --storage: it opens the bucket, runs
// f with it and closes it.
func (a *app) onBucket(f func(cmd *cobra.Command, b *blob.Bucket) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		b, err := a.open(cmd.Context())
		if err != nil {
			return err
		}
		defer b.Close()
		return f(cmd, b)
	}
}

// readLogInfo reads the meta object and the writer states; a writer whose
// state is older than staleAfter is stale.
func (a *app) readLogInfo(ctx context.Context, b *blob.Bucket, staleAfter time.Duration) (*logInfo, error) {
	log := a.log(b)
	st, err := log.Status(ctx)
	switch {
	case errors.Is(err, redokit.ErrNoLog):
		return nil, fmt.Errorf("no log %q in %s: its meta object %s does not exist (check --log and --storage)", a.logID, a.storageShown(), log.MetaKey())
	case err != nil:
		return nil, fmt.Errorf("read the status of log %q: %w", a.logID, err)
	}
	m := st.Meta
	info := &logInfo{
		LogID: m.LogID, Storage: a.storageShown(), CheckpointTs: m.CheckpointTs, ResolvedTs: m.ResolvedTs,
		Updated: m.Updated, Spans: spanTs(m.Spans), Barriers: barriersJSON(m.Barriers), m: m, states: map[string]*meta.WriterState{},
		StaleAfterSeconds: staleAfter.Seconds(),
	}
	now := time.Now()
	for _, ws := range st.Writers {
		w := writerInfo{WriterID: ws.ID, Live: ws.Live, MetaEpoch: ws.MetaEpoch}
		if s := ws.State; s != nil {
			info.states[ws.ID] = s
			w.Epoch, w.FlushedTs, w.Seq, w.HasSeq = s.Epoch, s.FlushedTs, s.Seq, s.HasSeq
			w.Fences, w.Spans, w.Owner, w.Updated = fencesJSON(s.Fences), len(s.Spans), s.Owner, s.Updated
			age := now.Sub(s.Updated)
			w.AgeSeconds, w.Stale = age.Seconds(), age > staleAfter
		} else {
			// A writer with no state object has published nothing: the
			// coordinator counts it stale too.
			w.NoState, w.Stale = true, true
		}
		info.Writers = append(info.Writers, w)
	}
	return info, nil
}

func (a *app) printMeta(info *logInfo) {
	tw := a.table()
	fmt.Fprintf(tw, "log\t%s\n", info.LogID)
	fmt.Fprintf(tw, "storage\t%s\n", info.Storage)
	fmt.Fprintf(tw, "checkpoint ts\t%s\n", tsDesc(info.CheckpointTs))
	resolved := tsDesc(info.ResolvedTs)
	if lag := tsLag(info.CheckpointTs, info.ResolvedTs); lag != "" {
		resolved += "   " + lag + " ahead of the checkpoint"
	}
	fmt.Fprintf(tw, "global resolved ts\t%s\n", resolved)
	fmt.Fprintf(tw, "updated\t%s\n", info.Updated.Format(time.RFC3339))
	if len(info.Spans) > 0 {
		low := ^uint64(0)
		for _, ts := range info.Spans {
			low = min(low, ts)
		}
		fmt.Fprintf(tw, "spans\t%d (lowest effective flushed ts %d)\n", len(info.Spans), low)
	}
	if len(info.Barriers) == 0 {
		fmt.Fprintf(tw, "DDL barriers\tnone\n")
	}
	for _, br := range info.Barriers {
		fmt.Fprintf(tw, "DDL barrier\t%s at %d\n", br.ID, br.CommitTs)
	}
	tw.Flush()
	fmt.Fprintln(a.stdout)
	if len(info.Writers) == 0 {
		fmt.Fprintln(a.stdout, "no writers")
		return
	}
	fmt.Fprintf(a.stdout, "writers (stale: state object older than %v)\n", time.Duration(info.StaleAfterSeconds*float64(time.Second)))
	tw = a.table()
	fmt.Fprintln(tw, "WRITER\tLIVE\tEPOCH\tFLUSHED TS\tSEQ\tFENCES\tOWNER\tUPDATED\tAGE\tSTALE")
	for _, w := range info.Writers {
		live := yesNo(w.Live)
		if w.NoState {
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\t-\tno state object\t-\t%s\n", w.WriterID, live, yesNo(w.Stale))
			continue
		}
		seq := "-"
		if w.HasSeq {
			seq = fmt.Sprint(w.Seq)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", w.WriterID, live, w.Epoch, w.FlushedTs, seq,
			fencesString(w.Fences), orDash(w.Owner), w.Updated.Format(time.RFC3339), ageString(w.AgeSeconds), yesNo(w.Stale))
	}
	tw.Flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// ageString is an age in seconds, rounded for a person: "850ms", "12s",
// "3h25m10s".
func ageString(seconds float64) string {
	d := time.Duration(seconds * float64(time.Second))
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}

// fencesString shows fences as "e1≤7 e2≤9": epoch 1's segments above seq 7
// were written after it was fenced.
func fencesString(fs []fenceJSON) string {
	if len(fs) == 0 {
		return "-"
	}
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = fmt.Sprintf("e%d≤%d", f.Epoch, f.LastSeq)
	}
	return strings.Join(parts, " ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
