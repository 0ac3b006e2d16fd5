package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/meta"
)

func (a *app) writerCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "writer",
		Short: "List the log's writers; fence or remove a dead one",
		Long: `writer lists the log's writers with the age of their state objects, and fences
or removes a writer whose process died.

A writer killed without closing stays a live writer of the meta object, and the
global resolved ts waits for it forever. After the CDC system moved its spans to
another writer, 'redokit writer rm W' fences it (a new epoch: a zombie of the
old process can publish nothing more, every flush it reported stays in the log)
and removes it from the live writers, so the global resolved ts stops waiting
for it. The spans it owned keep the progress it made.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageErrorf("writer needs a subcommand: ls, fence W, rm W")
		},
	}
	cmd.AddCommand(a.writerLsCmd(), a.writerFenceCmd(), a.writerRmCmd())
	return cmd
}

func staleAfterFlag(cmd *cobra.Command, d *time.Duration) {
	cmd.Flags().DurationVar(d, "stale-after", defaultStaleAfter, "a writer whose state object is older than this is stale (the coordinator's StaleAfter)")
}

func checkStaleAfter(d time.Duration) error {
	if d <= 0 {
		return usageErrorf("--stale-after %v: must be positive", d)
	}
	return nil
}

func (a *app) writerLsCmd() *cobra.Command {
	var staleAfter time.Duration
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the writers: epoch, flushed ts, age of the state object, stale, live",
		Long: `ls lists every writer of the log: its epoch, flushed resolved ts, the age of its
state object (now minus its last write), whether that age is above
--stale-after (stale: the process stopped publishing), and whether the meta
object counts it as live (the global resolved ts waits for live writers).`,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{annStorage: "1", annLog: "1"},
		RunE: a.onBucket(func(cmd *cobra.Command, b *blob.Bucket) error {
			if err := checkStaleAfter(staleAfter); err != nil {
				return err
			}
			info, err := a.readLogInfo(cmd.Context(), b, staleAfter)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(struct {
					Log               string       `json:"log"`
					ResolvedTs        uint64       `json:"resolved_ts,string"`
					StaleAfterSeconds float64      `json:"stale_after_seconds"`
					Writers           []writerInfo `json:"writers"`
				}{info.LogID, info.ResolvedTs, info.StaleAfterSeconds, orEmpty(info.Writers)})
			}
			fmt.Fprintf(a.stdout, "log %s: global resolved ts %s; stale: state object older than %v\n", info.LogID, tsDesc(info.ResolvedTs), staleAfter)
			if len(info.Writers) == 0 {
				fmt.Fprintln(a.stdout, "no writers")
				return nil
			}
			tw := a.table()
			fmt.Fprintln(tw, "WRITER\tEPOCH\tFLUSHED TS\tAGE\tSTALE\tLIVE")
			for _, w := range info.Writers {
				if w.NoState {
					fmt.Fprintf(tw, "%s\t-\t-\tno state object\t%s\t%s\n", w.WriterID, yesNo(w.Stale), yesNo(w.Live))
					continue
				}
				fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", w.WriterID, w.Epoch, w.FlushedTs, ageString(w.AgeSeconds), yesNo(w.Stale), yesNo(w.Live))
			}
			return tw.Flush()
		}),
	}
	staleAfterFlag(cmd, &staleAfter)
	return cmd
}

func orEmpty(ws []writerInfo) []writerInfo {
	if ws == nil {
		return []writerInfo{}
	}
	return ws
}

// fenceResult is what fence (and rm) did to a writer's state.
type fenceResult struct {
	Log             string     `json:"log"`
	Writer          string     `json:"writer"`
	Key             string     `json:"key"`
	EpochBefore     uint64     `json:"epoch_before"`
	FlushedTsBefore uint64     `json:"flushed_ts_before,string"`
	Epoch           uint64     `json:"epoch"`
	FlushedTs       uint64     `json:"flushed_ts,string"`
	Fence           *fenceJSON `json:"fence,omitempty"`
	Removed         bool       `json:"removed,omitempty"`
}

// writerState reads writer id's state object; a missing one is an error
// naming the writer and the key.
func (a *app) writerState(ctx context.Context, b *blob.Bucket, id string) (*meta.WriterState, error) {
	log := a.log(b)
	states, err := log.WriterStates(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the state of writer %s of log %s (%s): %w", id, a.logID, log.WriterKey(id), err)
	}
	st := states[id]
	if st == nil {
		return nil, fmt.Errorf("writer %s of log %s has no state object %s (see 'redokit writer ls')", id, a.logID, log.WriterKey(id))
	}
	return st, nil
}

// fence fences writer id and returns what its state says before and after.
func (a *app) fence(ctx context.Context, b *blob.Bucket, id string, before *meta.WriterState) (*fenceResult, error) {
	log := a.log(b)
	key := log.WriterKey(id)
	if err := log.FenceWriter(ctx, id); err != nil {
		return nil, fmt.Errorf("fence writer %s of log %s (%s)%s: %w", id, a.logID, key, fullHint(err), err)
	}
	after, err := a.writerState(ctx, b, id)
	if err != nil {
		return nil, err
	}
	res := &fenceResult{Log: a.logID, Writer: id, Key: key, EpochBefore: before.Epoch, FlushedTsBefore: before.FlushedTs,
		Epoch: after.Epoch, FlushedTs: after.FlushedTs}
	for _, f := range after.Fences {
		if f.Epoch == before.Epoch {
			fj := newFenceJSON(f)
			res.Fence = &fj
		}
	}
	return res, nil
}

func (a *app) printFence(r *fenceResult) {
	fence := fmt.Sprintf("epoch %d published nothing: all its segments are ignored", r.EpochBefore)
	if r.Fence != nil {
		fence = fmt.Sprintf("fence e%d≤%d: its segments above seq %d are ignored", r.Fence.Epoch, r.Fence.LastSeq, r.Fence.LastSeq)
	}
	fmt.Fprintf(a.stdout, "writer %s of log %s fenced: epoch %d → %d (%s); flushed ts %d → %d (state object %s)\n",
		r.Writer, r.Log, r.EpochBefore, r.Epoch, fence, r.FlushedTsBefore, r.FlushedTs, r.Key)
}

func writerArg(args []string) (string, error) {
	if err := checkID(args[0]); err != nil {
		return "", usageErrorf("writer %q: %v", args[0], err)
	}
	return args[0], nil
}

func (a *app) writerFenceCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "fence W",
		Short: "Fence writer W: a new epoch, so the old process can publish nothing more",
		Long: `fence takes writer W's next epoch without writing under it: a process that
still holds the old epoch (a zombie) can publish nothing more, and its segments
written after the fence are ignored by readers. The fence is where the old
epoch's durable progress ends, not only its last publication: every flush it
reported stays in the log. W stays a live writer of the meta object ('writer rm'
removes it). It prints the fence recorded in W's state object.`,
		Example:     `  redokit writer fence --storage s3://bucket/redo --log cf1 capture-2`,
		Args:        cobra.ExactArgs(1),
		Annotations: map[string]string{annStorage: "1", annLog: "1"},
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := writerArg(args)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			b, _, err := a.openMeta(ctx)
			if err != nil {
				return err
			}
			defer b.Close()
			before, err := a.writerState(ctx, b, id)
			if err != nil {
				return err
			}
			res, err := a.fence(ctx, b, id, before)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(res)
			}
			a.printFence(res)
			return nil
		},
	}
}

func (a *app) writerRmCmd() *cobra.Command {
	var (
		staleAfter time.Duration
		yes, force bool
	)
	cmd := &cobra.Command{
		Use:   "rm W",
		Short: "Fence a dead writer W and remove it from the live writers",
		Long: `rm fences writer W (as 'writer fence' does) and removes it from the meta object's
live writers, so the global resolved ts stops waiting for it: the failover step
after its process died, once the CDC system moved its spans to another writer.
The spans it owned keep the progress it made durable. Its state object and
segments stay (GC collects the segments below the checkpoint).

It refuses a writer whose state object is younger than --stale-after (default
30s): it may be alive; --force removes it anyway. It asks first (or needs --yes
when stdin is not a terminal).`,
		Example:     `  redokit writer rm --storage s3://bucket/redo --log cf1 capture-2 --yes`,
		Args:        cobra.ExactArgs(1),
		Annotations: map[string]string{annStorage: "1", annLog: "1"},
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := writerArg(args)
			if err != nil {
				return err
			}
			if err := checkStaleAfter(staleAfter); err != nil {
				return err
			}
			ctx := cmd.Context()
			b, m, err := a.openMeta(ctx)
			if err != nil {
				return err
			}
			defer b.Close()
			log := a.log(b)
			key := log.WriterKey(id)
			if _, live := m.Writers[id]; !live {
				return fmt.Errorf("writer %s is not a live writer of log %s (meta object %s): nothing to remove", id, a.logID, log.MetaKey())
			}
			states, err := log.WriterStates(ctx)
			if err != nil {
				return fmt.Errorf("read the state of writer %s of log %s (%s): %w", id, a.logID, key, err)
			}
			// A live writer without a state object never opened: it holds
			// the global resolved ts at zero, and there is nothing to fence.
			before := states[id]
			q := fmt.Sprintf("Remove writer %s from the live writers of log %s? It has no state object %s: it never published.", id, a.logID, key)
			if before != nil {
				age := time.Since(before.Updated)
				if age <= staleAfter && !force {
					return fmt.Errorf("writer %s of log %s published its state %s %s ago, within --stale-after %v: it may be alive; stop it first, or pass --force",
						id, a.logID, key, ageString(age.Seconds()), staleAfter)
				}
				q = fmt.Sprintf("Fence writer %s of log %s (epoch %d, flushed ts %d, last published %s ago) and remove it from the live writers?",
					id, a.logID, before.Epoch, before.FlushedTs, ageString(age.Seconds()))
			}
			if !yes {
				if !a.canPrompt() {
					return fmt.Errorf("refusing to remove writer %s of log %s without confirmation: pass --yes (stdin is not a terminal, so there is no prompt)", id, a.logID)
				}
				if !a.confirm(q) {
					return fmt.Errorf("not confirmed: writer %s stays", id)
				}
			}
			res := &fenceResult{Log: a.logID, Writer: id, Key: key}
			if before != nil {
				if res, err = a.fence(ctx, b, id, before); err != nil {
					return err
				}
			}
			coord, err := log.OpenCoordinator(ctx, &meta.CoordinatorOptions{Logger: a.logger()})
			if err == nil {
				err = coord.RemoveWriter(ctx, id)
			}
			if err != nil {
				return fmt.Errorf("writer %s of log %s is fenced (epoch %d, %s) but still live: remove it from the meta object %s: %w (run again with --force: the fence made its state fresh)%s",
					id, a.logID, res.Epoch, key, log.MetaKey(), err, fullHint(err))
			}
			res.Removed = true
			if a.jsonOut {
				return a.printJSON(res)
			}
			if before != nil {
				a.printFence(res)
			}
			fmt.Fprintf(a.stdout, "writer %s removed from the live writers of log %s (%s): the global resolved ts no longer waits for it\n", id, a.logID, log.MetaKey())
			return nil
		},
	}
	staleAfterFlag(cmd, &staleAfter)
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "remove it without asking")
	cmd.Flags().BoolVar(&force, "force", false, "remove it even though its state object is younger than --stale-after")
	return cmd
}
