package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/redokit/redokit/meta"
)

func (a *app) checkpointCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "checkpoint",
		Short: "Move the log's checkpoint ts (after a manual recovery)",
		Long: `checkpoint set moves the checkpoint ts in the log's meta object: the point up to
which the downstream holds the log. A CDC system's sink moves it as it applies;
after a manual recovery ('redokit apply' up to the global resolved ts), set it
so that 'redokit gc' can delete what the downstream now holds.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageErrorf("checkpoint needs a subcommand: set TS")
		},
	}
	cmd.AddCommand(a.checkpointSetCmd())
	return cmd
}

func (a *app) checkpointSetCmd() *cobra.Command {
	var (
		force bool
		yes   bool
	)
	cmd := &cobra.Command{
		Use:   "set TS",
		Short: "Set the checkpoint ts to TS (a commit ts, or an RFC 3339 time)",
		Long: `set moves the checkpoint ts to TS, a commit ts or an RFC 3339 time (the first
TSO of its millisecond), by compare-and-swap on the meta object, as the
coordinator does: a concurrent change of the object is never overwritten.

Moving it forward tells GC the downstream holds everything up to TS: the next
'redokit gc' deletes the segments wholly below it. It cannot pass the global
resolved ts: the log is only complete up to there, and a checkpoint above it
would make every later update of the meta object fail. Moving it backwards
(the downstream was restored from an older backup) needs --force; segments GC
already deleted do not come back, and a replay that needs them fails.

It shows the move and asks first (or needs --yes when stdin is not a
terminal).`,
		Example: `  redokit checkpoint set --storage /var/redo --log cf1 455000000000000000
  redokit checkpoint set --storage s3://bucket/redo --log cf1 2025-01-01T12:00:00Z --yes
  redokit checkpoint set --storage /var/redo --log cf1 --yes "$(redokit meta --storage /var/redo --log cf1 --json | jq -r .resolved_ts)"`,
		Args:        cobra.ExactArgs(1),
		Annotations: map[string]string{annStorage: "1", annLog: "1"},
		RunE: func(cmd *cobra.Command, args []string) error {
			var ts uint64
			if err := (tsValue{&ts}).Set(args[0]); err != nil {
				return usageErrorf("checkpoint set %q: %v", args[0], err)
			}
			ctx := cmd.Context()
			// Read first: OpenCoordinator would create a missing log.
			b, m, err := a.openMeta(ctx)
			if err != nil {
				return err
			}
			defer b.Close()
			from := m.CheckpointTs
			switch {
			case ts > m.ResolvedTs:
				return fmt.Errorf("checkpoint %s is above the global resolved ts %s of log %s: the log is only complete up to there (--force does not change this)", tsDesc(ts), tsDesc(m.ResolvedTs), a.logID)
			case ts < from && !force:
				return fmt.Errorf("checkpoint %s is below the current checkpoint %s of log %s: the checkpoint only moves forward; pass --force to move it back (segments GC deleted below %d stay deleted)", tsDesc(ts), tsDesc(from), a.logID, from)
			case ts == from:
				return a.printCheckpoint(from, ts, m.ResolvedTs, false)
			}
			if !yes {
				verb := "Move"
				if ts < from {
					verb = "Move BACK"
				}
				q := fmt.Sprintf("%s the checkpoint of log %s from %s to %s (global resolved ts %d)?", verb, a.logID, tsDesc(from), tsDesc(ts), m.ResolvedTs)
				if ts > from {
					q += " The next gc deletes the segments wholly below it."
				}
				if !a.canPrompt() {
					return fmt.Errorf("refusing to move the checkpoint of log %s without confirmation: pass --yes (stdin is not a terminal, so there is no prompt)", a.logID)
				}
				if !a.confirm(q) {
					return fmt.Errorf("not confirmed: the checkpoint stays at %d", from)
				}
			}
			coord, err := a.log(b).OpenCoordinator(ctx, &meta.CoordinatorOptions{Logger: a.logger()})
			if err != nil {
				return fmt.Errorf("open the coordinator of log %q: %w", a.logID, err)
			}
			if ts < from {
				err = coord.RewindCheckpoint(ctx, ts)
			} else {
				err = coord.SetCheckpoint(ctx, ts)
			}
			now := coord.Meta()
			switch {
			case errors.Is(err, meta.ErrBackwards):
				// The checkpoint moved on between the read above and the
				// compare-and-swap.
				return fmt.Errorf("checkpoint %d of log %s: the checkpoint moved meanwhile, to %d; pass --force to move it back: %w", ts, a.logID, now.CheckpointTs, err)
			case err != nil:
				return fmt.Errorf("set the checkpoint of log %s to %d%s: %w", a.logID, ts, fullHint(err), err)
			}
			return a.printCheckpoint(from, now.CheckpointTs, now.ResolvedTs, true)
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "allow moving the checkpoint backwards")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "move it without asking")
	return cmd
}

func (a *app) printCheckpoint(from, to, resolved uint64, moved bool) error {
	if a.jsonOut {
		return a.printJSON(struct {
			Log        string `json:"log"`
			From       uint64 `json:"from,string"`
			To         uint64 `json:"checkpoint_ts,string"`
			ResolvedTs uint64 `json:"resolved_ts,string"`
			Moved      bool   `json:"moved"`
		}{a.logID, from, to, resolved, moved})
	}
	if !moved {
		fmt.Fprintf(a.stdout, "log %s: the checkpoint is already %s\n", a.logID, tsDesc(to))
		return nil
	}
	fmt.Fprintf(a.stdout, "log %s: checkpoint moved from %s to %s (global resolved ts %s)\n", a.logID, tsDesc(from), tsDesc(to), tsDesc(resolved))
	return nil
}
