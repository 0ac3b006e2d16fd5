package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/redokit/redokit"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/gc"
	"github.com/redokit/redokit/meta"
)

// refuseDelete is the error of a deletion that was not confirmed.
func refuseDelete(what string) error {
	return fmt.Errorf("refusing to delete %s without confirmation: pass --yes (stdin is not a terminal, so there is no prompt)", what)
}

func (a *app) gcCmd() *cobra.Command {
	var (
		dryRun bool
		yes    bool
		grace  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Delete the segments wholly below the checkpoint ts",
		Long: `gc deletes, per writer epoch, the bottom of its chain of sealed segments whose
largest commit ts is below the checkpoint ts in the meta object: the downstream
has applied all of it. Segments ending at the checkpoint stay, and so does a
segment above one that stays. It decides from the segment names, the checkpoint
and the writer states, and reads no segment.

By the fences in the writer states it also deletes what no reader accepts (a
zombie's segments above its epoch's fence, an epoch replaced before it
published anything) and a fenced epoch's whole chain, its unsealed (.active)
segment too, once the fence is below the checkpoint. A dead writer's .active
segment goes after 'redokit writer rm' fenced it and the checkpoint passed
the fence; an active segment of a current epoch always stays.

gc writes nothing: on a full store it is the first thing to run (OPERATIONS.md,
"Storage full"). It shows what it would delete and asks before deleting (or
needs --yes when stdin is not a terminal). --dry-run only shows.`,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{annStorage: "1", annLog: "1"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if grace < 0 {
				return usageErrorf("--grace %v: want a duration of 0 or more", grace)
			}
			b, m, err := a.openMeta(ctx)
			if err != nil {
				return err
			}
			defer b.Close()
			// Below pins the cut at the checkpoint read here, so the deletion is the
			// one the plan showed even if the checkpoint moves before it runs.
			opts := &gc.Options{DryRun: true, Grace: grace, Below: m.CheckpointTs}
			plan, err := a.log(b).Collect(ctx, opts)
			if err != nil {
				return err
			}
			if dryRun || plan.Deleted == 0 {
				return a.printGC(plan, m, dryRun)
			}
			if !yes {
				if !a.canPrompt() {
					return refuseDelete(fmt.Sprintf("%d segments", plan.Deleted))
				}
				if !a.confirm(fmt.Sprintf("Delete %d segments (%s) of log %s below checkpoint ts %d?", plan.Deleted, humanBytes(plan.FreedBytes), a.logID, m.CheckpointTs)) {
					return fmt.Errorf("not confirmed: nothing deleted")
				}
			}
			opts.DryRun = false
			res, err := a.log(b).Collect(ctx, opts)
			if err != nil {
				return err
			}
			return a.printGC(res, m, false)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&dryRun, "dry-run", false, "list what would be deleted, delete nothing")
	f.BoolVarP(&yes, "yes", "y", false, "delete without asking")
	f.DurationVar(&grace, "grace", 0, "keep segments modified within this long ago, whatever their ts")
	return cmd
}

func (a *app) printGC(res *gc.Result, m *meta.Meta, dry bool) error {
	if a.jsonOut {
		keys := res.DeletedKeys
		if keys == nil {
			keys = []string{}
		}
		return a.printJSON(struct {
			Log          string   `json:"log"`
			CheckpointTs uint64   `json:"checkpoint_ts,string"`
			DryRun       bool     `json:"dry_run"`
			Listed       int      `json:"listed"`
			Deleted      int      `json:"deleted"`
			FreedBytes   int64    `json:"freed_bytes"`
			KeptByGrace  int      `json:"kept_by_grace"`
			KeptByChain  int      `json:"kept_by_chain"`
			Superseded   int      `json:"superseded"`
			KeptActive   int      `json:"kept_active"`
			FenceRuleErr string   `json:"fence_rule_error,omitempty"`
			Keys         []string `json:"keys"`
		}{a.logID, m.CheckpointTs, dry, res.Listed, res.Deleted, res.FreedBytes, res.KeptByGrace, res.KeptByChain,
			res.Superseded, res.KeptActive, errString(res.FenceRuleErr), keys})
	}
	verb := "deleted"
	if dry {
		verb = "would delete"
		for _, k := range slices.Sorted(slices.Values(res.DeletedKeys)) {
			fmt.Fprintln(a.stdout, k)
		}
	}
	fmt.Fprintf(a.stdout, "log %s, checkpoint ts %d: %d segments listed, %s %d (%s)", a.logID, m.CheckpointTs, res.Listed, verb, res.Deleted, humanBytes(res.FreedBytes))
	if res.KeptByGrace > 0 {
		fmt.Fprintf(a.stdout, ", %d kept by --grace", res.KeptByGrace)
	}
	if res.KeptByChain > 0 {
		// Below the checkpoint, but above a segment of their epoch that
		// stays: they go once it does (see package gc).
		fmt.Fprintf(a.stdout, ", %d below the checkpoint kept until the segments below them in their chain go", res.KeptByChain)
	}
	if res.Superseded > 0 {
		fmt.Fprintf(a.stdout, ", %d of them of epochs their writer's fence superseded", res.Superseded)
	}
	if res.KeptActive > 0 {
		// The case an operator meets on a full disk: a dead writer's
		// unsealed segment, which only a fence lets go.
		fmt.Fprintf(a.stdout, ", %d active (unsealed) kept: a dead writer's goes after 'redokit writer rm' and a checkpoint past its fence", res.KeptActive)
	}
	fmt.Fprintln(a.stdout)
	if res.FenceRuleErr != nil {
		fmt.Fprintf(a.stderr, "warning: the writer states of log %s could not be read, so nothing was collected by their fences: %v\n", a.logID, res.FenceRuleErr)
	}
	return nil
}

func (a *app) rmCmd() *cobra.Command {
	var (
		yes   bool
		force bool
	)
	cmd := &cobra.Command{
		Use:   "rm",
		Short: "Delete a whole log: segments, writer states and meta object",
		Long: `rm deletes every object of the log. It writes a marker first, so a removal that
is interrupted is finished by the next writer or coordinator that opens the log
(a new log of the same ID never mixes with the old one's leftovers). On a full
store (no space left for the marker) it deletes first: the log's segments one at
a time, from the bottom of a writer's chain (reads of the log fail on the gap
meanwhile), until the marker fits, then the rest.

It asks for the log ID to confirm (or needs --yes when stdin is not a terminal),
and refuses while a writer published progress in the last 30 seconds unless
--force: a live writer would go on writing into a log being removed.`,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{annStorage: "1", annLog: "1"},
		RunE: a.onBucket(func(cmd *cobra.Command, b *blob.Bucket) error {
			ctx := cmd.Context()
			log := a.log(b)
			objects, bytes, err := log.Size(ctx)
			if err != nil {
				return err
			}
			if objects == 0 {
				return fmt.Errorf("no log %q in %s: it has no objects", a.logID, a.storageShown())
			}
			if !force {
				if err := a.refuseLiveWriters(ctx, log); err != nil {
					return err
				}
			}
			if !yes {
				if !a.canPrompt() {
					return refuseDelete(fmt.Sprintf("log %s (%d objects)", a.logID, objects))
				}
				got := a.answer(fmt.Sprintf("Delete log %s (%d objects, %s) in %s? Type the log ID to confirm: ", a.logID, objects, humanBytes(bytes), a.storageShown()))
				if got != a.logID {
					return fmt.Errorf("not confirmed: nothing deleted")
				}
			}
			n, err := log.Delete(ctx)
			switch {
			case errors.Is(err, gc.ErrNoMarker) && n == 0:
				return fmt.Errorf("delete log %q: nothing deleted, the removal did not start (writers and coordinators do not refuse the log)%s: %w", a.logID, fullHint(err), err)
			case errors.Is(err, gc.ErrNoMarker):
				// Deleted to make room on a full store, then the marker
				// still failed: readers fail on the gap; nothing else knows.
				return fmt.Errorf("delete log %q: %d segments deleted to make room for the delete marker, which still could not be written: the log is partly deleted without its marker, so reads of it fail on the missing segments, while writers and coordinators do not refuse it; run rm again to finish%s: %w", a.logID, n, fullHint(err), err)
			case err != nil:
				return fmt.Errorf("delete log %q (%d objects deleted; the delete marker is written, so writers and coordinators refuse the log until rm is run again to finish, except those opened through redokit.Log, which finish the removal first): %w", a.logID, n, err)
			}
			if a.jsonOut {
				return a.printJSON(struct {
					Log     string `json:"log"`
					Deleted int    `json:"deleted"`
					Bytes   int64  `json:"bytes"`
				}{a.logID, n, bytes})
			}
			fmt.Fprintf(a.stdout, "deleted log %s: %d objects, %s\n", a.logID, n, humanBytes(bytes))
			return nil
		}),
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "delete without asking")
	cmd.Flags().BoolVar(&force, "force", false, "delete even while writers seem alive")
	return cmd
}

// refuseLiveWriters fails while a writer of the log seems alive: it
// published progress in the last 30 seconds and it was not released. A
// writer is released when the coordinator removed it from the live writers
// after its last publication (gen and demo do so once they closed their
// writers); one that published after its removal is a process still
// writing, and counts as alive. Without a meta object, every writer counts.
func (a *app) refuseLiveWriters(ctx context.Context, log *redokit.Log) error {
	states, err := log.WriterStates(ctx)
	if err != nil {
		return fmt.Errorf("read the writer states of log %q (pass --force to delete anyway): %w", a.logID, err)
	}
	m, err := log.Meta(ctx)
	if err != nil && !errors.Is(err, redokit.ErrNoLog) {
		return fmt.Errorf("read the meta object of log %q (pass --force to delete anyway): %w", a.logID, err)
	}
	for _, id := range slices.Sorted(maps.Keys(states)) {
		st := states[id]
		age := time.Since(st.Updated)
		if age >= 30*time.Second {
			continue
		}
		if m != nil {
			if _, live := m.Writers[id]; !live && !st.Updated.After(m.Updated) {
				continue
			}
		}
		return fmt.Errorf("writer %q of log %s published progress %.1fs ago and was not released: stop the writers first, or pass --force", id, a.logID, age.Seconds())
	}
	return nil
}
