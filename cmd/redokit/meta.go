package main

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

func (a *app) metaCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "meta",
		Short: "Print the log's checkpoint ts, global resolved ts, writers and epochs",
		Long: `meta prints the log's meta object — the checkpoint ts (how far the downstream
has applied), the global resolved ts (how far the log is complete) — and the state
of every writer: live or removed, epoch, flushed resolved ts, last published
segment seq, and the fences its earlier epochs left (a zombie's segments above a
fence are ignored by readers).`,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{annStorage: "1", annLog: "1"},
		RunE: a.onBucket(func(cmd *cobra.Command, b *blob.Bucket) error {
			ctx := cmd.Context()
			info, err := a.readLogInfo(ctx, b)
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
}

// writerInfo is one writer as meta shows it.
type writerInfo struct {
	WriterID  string       `json:"writer"`
	Live      bool         `json:"live"`
	Epoch     uint64       `json:"epoch"`
	FlushedTs uint64       `json:"flushed_ts"`
	Seq       uint64       `json:"seq"`
	HasSeq    bool         `json:"has_seq"`
	Fences    []meta.Fence `json:"fences,omitempty"`
	Spans     int          `json:"spans,omitempty"`
	Owner     string       `json:"owner,omitempty"`
	Updated   time.Time    `json:"updated"`
	// MetaEpoch is the epoch the coordinator last saw; 0 when it is not live.
	MetaEpoch uint64 `json:"meta_epoch,omitempty"`
	// NoState: the meta object names the writer but it has no state object.
	NoState bool `json:"no_state,omitempty"`
}

// logInfo is what meta prints.
type logInfo struct {
	LogID        string                 `json:"log"`
	Storage      string                 `json:"storage"`
	CheckpointTs uint64                 `json:"checkpoint_ts"`
	ResolvedTs   uint64                 `json:"resolved_ts"`
	Updated      time.Time              `json:"updated"`
	Spans        map[meta.SpanID]uint64 `json:"spans,omitempty"`
	Barriers     []meta.Barrier         `json:"barriers,omitempty"`
	Writers      []writerInfo           `json:"writers"`

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

func (a *app) readLogInfo(ctx context.Context, b *blob.Bucket) (*logInfo, error) {
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
		Updated: m.Updated, Spans: m.Spans, Barriers: m.Barriers, m: m, states: map[string]*meta.WriterState{},
	}
	for _, ws := range st.Writers {
		w := writerInfo{WriterID: ws.ID, Live: ws.Live, MetaEpoch: ws.MetaEpoch}
		if s := ws.State; s != nil {
			info.states[ws.ID] = s
			w.Epoch, w.FlushedTs, w.Seq, w.HasSeq = s.Epoch, s.FlushedTs, s.Seq, s.HasSeq
			w.Fences, w.Spans, w.Owner, w.Updated = s.Fences, len(s.Spans), s.Owner, s.Updated
		} else {
			w.NoState = true
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
	tw = a.table()
	fmt.Fprintln(tw, "WRITER\tLIVE\tEPOCH\tFLUSHED TS\tSEQ\tFENCES\tOWNER\tUPDATED")
	for _, w := range info.Writers {
		live := "no"
		if w.Live {
			live = "yes"
		}
		if w.NoState {
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\t-\tno state object\n", w.WriterID, live)
			continue
		}
		seq := "-"
		if w.HasSeq {
			seq = fmt.Sprint(w.Seq)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", w.WriterID, live, w.Epoch, w.FlushedTs, seq,
			fencesString(w.Fences), orDash(w.Owner), w.Updated.Format(time.RFC3339))
	}
	tw.Flush()
}

// fencesString shows fences as "e1≤7 e2≤9": epoch 1's segments above seq 7
// were written after it was fenced.
func fencesString(fs []meta.Fence) string {
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
