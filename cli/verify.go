package cli

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/redokit/redokit"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/reader"
	"github.com/redokit/redokit/segment"
)

// problemJSON is a reader.Problem as verify prints it.
type problemJSON struct {
	Severity string `json:"severity"`
	Kind     string `json:"kind"`
	Key      string `json:"key"`
	Offset   int64  `json:"offset"` // -1: the problem has no position
	Detail   string `json:"detail"`
	// MinTs and MaxTs bound the commit ts a damaged block held (see
	// reader.Problem), as strings (jsonts.go); each is left out when nothing
	// bounds the block on its side, and both when the problem is not a
	// damaged block. A replay whose --end-ts is below min_ts does not read
	// the block.
	MinTs string `json:"min_ts,omitempty"`
	MaxTs string `json:"max_ts,omitempty"`
}

func (a *app) verifyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "verify",
		Short: "Check every block's CRC, the order of events, and the meta's consistency",
		Long: `verify reads every segment of the log, whatever its ts range: every block's
CRC32C (all of them, not only the first bad one), every event's encoding and
commit-ts order, and whether each segment's header and footer agree with its
name. It proves every writer epoch's chain of segments complete from the
checkpoint: each segment's header links its predecessor (its seq, header and
footer CRCs, largest commit ts), so a missing or replaced segment, or a chain
that ends short of the seq its writer published, is an error ("incomplete");
so is an object under the log's prefix that is not a key the log writes. It
then checks the meta object and the writer states against each other
and against the segments (checkpoint at or below the resolved ts, a state for
every live writer, no segment from an epoch its writer never reached).

Every problem is listed with its object and byte offset; a damaged block also
with the commit-ts range it held (a sealed segment's footer index gives it; in
an active segment the blocks around it bound it): a replay whose --end-ts is
below that range does not read the block (--json: min_ts and max_ts). The exit
code is 1 if any problem is an error; informational findings (a torn tail of an
active segment, a zombie's segment a fence excludes) do not fail it.`,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{annStorage: "1", annLog: "1"},
		RunE: a.onBucket(func(cmd *cobra.Command, b *blob.Bucket) error {
			ctx := cmd.Context()
			log, err := redokit.Open(ctx, b, a.logID)
			if err != nil {
				return err
			}
			onSegment := a.verifyProgress(ctx, log)
			defer onSegment("")
			logger := slog.New(&countHandler{next: a.logger().Handler(), onCount: onSegment})
			rep, err := log.Verify(ctx, &reader.VerifyOptions{Logger: logger})
			onSegment("")
			if err != nil {
				return fmt.Errorf("verify log %q: %w", a.logID, err)
			}
			if a.jsonOut {
				if err := a.printJSON(verifyJSON(rep)); err != nil {
					return err
				}
			} else {
				a.printVerify(rep)
			}
			if !rep.OK() {
				return errSilent
			}
			return nil
		}),
	}
}

// verifyProgress returns what to call as each segment is verified (with its
// key; "" ends the bar). When a bar shows, the segments are listed first so
// that it counts bytes against their total, with the time left; if that
// listing fails, the bar counts segments without a total.
func (a *app) verifyProgress(ctx context.Context, log *redokit.Log) func(key string) {
	if !a.progressVisible() {
		return func(string) {}
	}
	sizes := map[string]int64{}
	var total int64
	for seg, err := range log.Segments(ctx) {
		if err != nil {
			sizes, total = nil, 0
			break
		}
		sizes[seg.Key] = seg.Size
		total += seg.Size
	}
	var bar *progressbar.ProgressBar
	if total > 0 {
		bar = a.bar(total, "verifying", true)
	} else {
		bar = a.bar(-1, "verifying segments", false)
	}
	var mu sync.Mutex
	var done int64
	finished := false
	return func(key string) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case finished:
		case key == "":
			finished = true
			_ = bar.Finish()
		case total > 0:
			_ = bar.Add64(sizes[key])
		default:
			done++
			_ = bar.Set64(done)
		}
	}
}

// countHandler passes records on and counts the per-segment progress
// records of reader.Verify, which is how verify drives its progress bar.
type countHandler struct {
	next    slog.Handler
	onCount func(key string)
}

func (h *countHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l == slog.LevelDebug || h.next.Enabled(ctx, l)
}

func (h *countHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "reader: verified segment" {
		key := ""
		r.Attrs(func(at slog.Attr) bool {
			if at.Key == "key" {
				key = at.Value.String()
				return false
			}
			return true
		})
		if key != "" {
			h.onCount(key)
		}
	}
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h *countHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &countHandler{next: h.next.WithAttrs(as), onCount: h.onCount}
}

func (h *countHandler) WithGroup(name string) slog.Handler {
	return &countHandler{next: h.next.WithGroup(name), onCount: h.onCount}
}

func verifyJSON(rep *reader.Report) any {
	probs := make([]problemJSON, 0, len(rep.Problems))
	for _, p := range rep.Problems {
		pj := problemJSON{Severity: p.Severity.String(), Kind: string(p.Kind), Key: p.Key, Offset: p.Offset, Detail: p.Detail}
		if p.HasTs && p.MinTs > 0 {
			pj.MinTs = strconv.FormatUint(p.MinTs, 10)
		}
		if p.HasTs && p.MaxTs < math.MaxUint64 {
			pj.MaxTs = strconv.FormatUint(p.MaxTs, 10)
		}
		probs = append(probs, pj)
	}
	return struct {
		Log        string        `json:"log"`
		ChainsFrom uint64        `json:"chains_from,string"`
		OK         bool          `json:"ok"`
		Errors     int           `json:"errors"`
		Objects    int           `json:"objects"`
		Bytes      int64         `json:"bytes"`
		Sealed     int           `json:"sealed"`
		Active     int           `json:"active"`
		Ignored    int           `json:"ignored"`
		Blocks     int64         `json:"blocks"`
		Events     int64         `json:"events"`
		Rows       int64         `json:"rows"`
		DDLs       int64         `json:"ddls"`
		MinTs      uint64        `json:"min_ts,string"`
		MaxTs      uint64        `json:"max_ts,string"`
		Problems   []problemJSON `json:"problems"`
	}{rep.LogID, rep.ChainsFrom, rep.OK(), len(rep.Errors()), rep.Objects, rep.Bytes, rep.Sealed, rep.Active, rep.Ignored,
		rep.Blocks, rep.Events, rep.Rows, rep.DDLs, rep.MinTs, rep.MaxTs, probs}
}

// displayKey quotes a key that is not valid UTF-8 or holds control
// characters (a damaged name verify reports), so that the table shows what
// it is instead of passing its bytes to the terminal.
func displayKey(k string) string {
	if utf8.ValidString(k) && !strings.ContainsFunc(k, unicode.IsControl) {
		return k
	}
	return strconv.Quote(k)
}

func (a *app) printVerify(rep *reader.Report) {
	if len(rep.Problems) > 0 {
		tw := a.table()
		fmt.Fprintln(tw, "SEVERITY\tKIND\tOBJECT\tOFFSET\tDETAIL")
		for _, p := range rep.Problems {
			off := "-"
			if p.Offset >= 0 {
				off = fmt.Sprint(p.Offset)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Severity, p.Kind, displayKey(p.Key), off, p.Detail)
		}
		tw.Flush()
		fmt.Fprintln(a.stdout)
	}
	fmt.Fprintf(a.stdout, "log %s: %d segments checked (%d sealed, %d active), %d ignored, %d blocks, %d events (%d rows, %d DDLs), %s",
		rep.LogID, rep.Sealed+rep.Active, rep.Sealed, rep.Active, rep.Ignored, rep.Blocks, rep.Events, rep.Rows, rep.DDLs, humanBytes(rep.Bytes))
	if rep.Events > 0 {
		fmt.Fprintf(a.stdout, ", commit ts [%d, %d]", rep.MinTs, rep.MaxTs)
	}
	fmt.Fprintf(a.stdout, "; writer chains checked for completeness above ts %d (the checkpoint)\n", rep.ChainsFrom)
	errs := len(rep.Errors())
	if errs == 0 {
		fmt.Fprintf(a.stdout, "OK: no errors (%d informational findings)\n", len(rep.Problems))
		return
	}
	fmt.Fprintf(a.stdout, "FAILED: %d errors, %d informational findings\n", errs, len(rep.Problems)-errs)
}

// damageHint points a read that met damaged bytes (a corrupt block names
// its key, offset and commit-ts range) at the runbook.
func damageHint(err error) error {
	if err == nil || !segment.IsCorrupt(err) {
		return err
	}
	return fmt.Errorf("%w (a replay whose --end-ts is below the damaged range does not read it; 'redokit verify' lists every damaged block; docs/OPERATIONS.md, \"A damaged block\")", err)
}
