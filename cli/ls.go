package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/redokit/redokit/blob"
)

// segInfo is one object under the log's segment prefix.
type segInfo struct {
	Key      string `json:"key"`
	Writer   string `json:"writer,omitempty"`
	Epoch    uint64 `json:"epoch"`
	Seq      uint64 `json:"seq"`
	MinTs    uint64 `json:"min_ts,string"` // 0 for an active segment: its name has no range
	MaxTs    uint64 `json:"max_ts,string"`
	Size     int64  `json:"size"`
	Sealed   bool   `json:"sealed"`
	Fenced   bool   `json:"fenced,omitempty"`   // its writer's fence excludes it: readers ignore it
	BadName  bool   `json:"bad_name,omitempty"` // not a segment name
	Modified string `json:"modified"`
}

func (s segInfo) state() string {
	switch {
	case s.BadName:
		return "not-a-segment"
	case !s.Sealed && s.Fenced:
		return "active,fenced"
	case !s.Sealed:
		return "active"
	case s.Fenced:
		return "sealed,fenced"
	}
	return "sealed"
}

// listSegments lists the log's segments, marking those the writers' fences
// exclude. onPage is called with the count so far (for a progress bar).
func (a *app) listSegments(ctx context.Context, b *blob.Bucket, onPage func(int)) ([]segInfo, error) {
	log := a.log(b)
	states, err := log.WriterStates(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the writer states of log %q: %w", a.logID, err)
	}
	var out []segInfo
	for seg, err := range log.Segments(ctx) {
		if err != nil {
			return nil, fmt.Errorf("list the segments of log %q: %w", a.logID, err)
		}
		si := segInfo{Key: seg.Key, Size: seg.Size, Modified: seg.ModTime.UTC().Format("2006-01-02T15:04:05Z")}
		if seg.NameErr != nil {
			si.BadName = true
		} else {
			n := seg.Name
			si.Writer, si.Epoch, si.Seq, si.MinTs, si.MaxTs, si.Sealed = n.WriterID, n.Epoch, n.Seq, n.MinTs, n.MaxTs, !n.Active
			if st := states[n.WriterID]; st != nil && !st.Accepts(n) {
				si.Fenced = true
			}
		}
		out = append(out, si)
		if onPage != nil && len(out)%1000 == 0 {
			onPage(len(out))
		}
	}
	return out, nil
}

func (a *app) lsCmd() *cobra.Command {
	var writerFilter string
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the log's segments: writer, epoch, sequence, ts range, size, sealed or not",
		Long: `ls lists the segments of the log from their names alone (no object is read):
writer, epoch, sequence number, commit-ts range, size, and state: sealed, active
(an unsealed local segment still appended to), and fenced when the writer's fence
excludes it (a zombie wrote it after losing its epoch; readers ignore it).`,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{annStorage: "1", annLog: "1"},
		RunE: a.onBucket(func(cmd *cobra.Command, b *blob.Bucket) error {
			ctx := cmd.Context()
			bar := a.bar(-1, "listing", false)
			segs, err := a.listSegments(ctx, b, func(n int) { _ = bar.Set(n) })
			_ = bar.Finish()
			if err != nil {
				return err
			}
			if len(segs) == 0 {
				// No segments is a fact about a log, or a typo in --log or
				// --storage: with no meta object either, there is no log,
				// and ls fails like every other command does.
				if _, err := a.readMeta(ctx, b); err != nil {
					return err
				}
			}
			if writerFilter != "" {
				kept := segs[:0]
				for _, s := range segs {
					if s.Writer == writerFilter {
						kept = append(kept, s)
					}
				}
				segs = kept
			}
			sum := summarize(segs)
			if a.jsonOut {
				if segs == nil {
					segs = []segInfo{}
				}
				return a.printJSON(struct {
					Log      string    `json:"log"`
					Segments []segInfo `json:"segments"`
					Summary  segSum    `json:"summary"`
				}{a.logID, segs, sum})
			}
			if len(segs) == 0 {
				fmt.Fprintf(a.stdout, "log %s has no segments in %s\n", a.logID, a.storageShown())
				return nil
			}
			tw := a.table()
			fmt.Fprintln(tw, "WRITER\tEPOCH\tSEQ\tMIN TS\tMAX TS\tSIZE\tSTATE\tKEY")
			for _, s := range segs {
				if s.BadName {
					fmt.Fprintf(tw, "-\t-\t-\t-\t-\t%d\t%s\t%s\n", s.Size, s.state(), s.Key)
					continue
				}
				minTs, maxTs := fmt.Sprint(s.MinTs), fmt.Sprint(s.MaxTs)
				if !s.Sealed {
					minTs, maxTs = "-", "-"
				}
				fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%d\t%s\t%s\n", s.Writer, s.Epoch, s.Seq, minTs, maxTs, s.Size, s.state(), s.Key)
			}
			tw.Flush()
			fmt.Fprintln(a.stdout, sum.String())
			return nil
		}),
	}
	cmd.Flags().StringVar(&writerFilter, "writer", "", "only the segments of this writer ID")
	return cmd
}

// segSum totals a listing.
type segSum struct {
	Segments int    `json:"segments"`
	Sealed   int    `json:"sealed"`
	Active   int    `json:"active"`
	Fenced   int    `json:"fenced"`
	BadNames int    `json:"bad_names"`
	Bytes    int64  `json:"bytes"`
	Writers  int    `json:"writers"`
	MinTs    uint64 `json:"min_ts,string"` // of the sealed segments
	MaxTs    uint64 `json:"max_ts,string"`
}

func summarize(segs []segInfo) segSum {
	var s segSum
	writers := map[string]bool{}
	for _, g := range segs {
		s.Bytes += g.Size
		if g.BadName {
			s.BadNames++
			continue
		}
		s.Segments++
		writers[g.Writer] = true
		if g.Fenced {
			s.Fenced++
		}
		if !g.Sealed {
			s.Active++
			continue
		}
		s.Sealed++
		if s.MinTs == 0 || g.MinTs < s.MinTs {
			s.MinTs = g.MinTs
		}
		s.MaxTs = max(s.MaxTs, g.MaxTs)
	}
	s.Writers = len(writers)
	return s
}

func (s segSum) String() string {
	var parts []string
	parts = append(parts, fmt.Sprintf("%s (%d sealed, %d active", plural(s.Segments, "segment"), s.Sealed, s.Active))
	if s.Fenced > 0 {
		parts[0] += fmt.Sprintf(", %d fenced", s.Fenced)
	}
	parts[0] += ")"
	parts = append(parts, plural(s.Writers, "writer"), humanBytes(s.Bytes))
	if s.Sealed > 0 {
		parts = append(parts, fmt.Sprintf("sealed ts range [%d, %d]", s.MinTs, s.MaxTs))
	}
	if s.BadNames > 0 {
		parts = append(parts, fmt.Sprintf("%d keys that are not segment names", s.BadNames))
	}
	return strings.Join(parts, ", ")
}
