package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/redokit/redokit/apply"
	"io"
	"math"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/spf13/cobra"

	"github.com/redokit/redokit"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/reader"
)

// rangeFlags are the --start-ts/--end-ts/--force flags of the commands that
// read a range (dump, apply).
type rangeFlags struct {
	start, end uint64
	force      bool
}

func (r *rangeFlags) register(cmd *cobra.Command, what string) {
	f := cmd.Flags()
	f.Var(tsValue{&r.start}, "start-ts", what+" events with commit ts above this, a ts or an RFC 3339 time (default: the checkpoint ts)")
	f.Var(tsValue{&r.end}, "end-ts", what+" events with commit ts up to and including this, a ts or an RFC 3339 time (default: the global resolved ts)")
	f.BoolVar(&r.force, "force", false, "allow --end-ts or --start-ts above the global resolved ts, as far as the writers' published progress proves the log complete (a read beyond that is refused)")
}

// resolve turns the flags into the range (start, end] against the log's
// meta with the log's own rules (redokit.CheckRange): by default
// (checkpoint, global resolved]. Reading above the global resolved ts is
// refused unless --force, because the log is only complete up to it; a
// --start-ts below the checkpoint is what the user asked for, with a warning
// that GC may have deleted segments there (the reader's chain proof then
// fails loudly rather than reading short).
func (r *rangeFlags) resolve(cmd *cobra.Command, a *app, m *meta.Meta) (start, end uint64, err error) {
	startSet, endSet := cmd.Flags().Changed("start-ts"), cmd.Flags().Changed("end-ts")
	if startSet && endSet && r.start >= r.end {
		return 0, 0, usageErrorf("--start-ts %d is not below --end-ts %d: the range (start, end] is empty", r.start, r.end)
	}
	// Above the global resolved ts with --force; below the checkpoint when
	// --start-ts asks for it (with the warning below).
	o := &redokit.ReadOptions{AllowAboveResolved: r.force, AllowBelowCheckpoint: startSet}
	if startSet {
		o.Start = r.start
	}
	if endSet {
		o.End = r.end
	}
	start, end, err = redokit.CheckRange(m, o)
	switch {
	case errors.Is(err, redokit.ErrAboveResolved):
		flag, ts := "--end-ts", r.end
		if !endSet || r.end <= m.ResolvedTs {
			flag, ts = "--start-ts", r.start
		}
		return 0, 0, fmt.Errorf("%s %d: %w (pass --force to read it anyway)", flag, ts, err)
	case errors.Is(err, redokit.ErrEmptyRange):
		return 0, 0, usageErrorf("the range is empty (--start-ts above the end, the global resolved ts unless --end-ts): %v", err)
	case err != nil:
		return 0, 0, err
	}
	if startSet && start < m.CheckpointTs {
		fmt.Fprintf(a.stderr, "redokit: warning: --start-ts %d is below the checkpoint ts %d: GC may have deleted segments below the checkpoint, so the range may be incomplete\n", start, m.CheckpointTs)
	}
	return start, end, nil
}

// openRange opens a reader of (start, end] through the Log handle, as a
// program using redokit does. The range already passed redokit.CheckRange
// against the meta object the command read (with --force and --start-ts as
// the user asked): a checkpoint that moved since must not refuse it now,
// and the reader still refuses what the log cannot prove (ErrUnproven).
func openRange(ctx context.Context, b *blob.Bucket, logID string, start, end uint64, o reader.Options) (*reader.Reader, error) {
	lg, err := redokit.Open(ctx, b, logID)
	if err != nil {
		return nil, err
	}
	return lg.OpenReader(ctx, &redokit.ReadOptions{Options: o, Start: start, End: end, AllowAboveResolved: true, AllowBelowCheckpoint: true})
}

// open opens the log's bucket and meta and resolves the range against them
// (resolve); the caller closes the bucket.
func (r *rangeFlags) open(ctx context.Context, cmd *cobra.Command, a *app) (b *blob.Bucket, m *meta.Meta, start, end uint64, err error) {
	if b, m, err = a.openMeta(ctx); err != nil {
		return nil, nil, 0, 0, err
	}
	if start, end, err = r.resolve(cmd, a, m); err != nil {
		b.Close()
		return nil, nil, 0, 0, err
	}
	return b, m, start, end, nil
}

// tableFilter parses --table values: "schema.name", or "name" for that
// table in any schema.
func tableFilter(specs []string) (func(codec.TableName) bool, *tableHits, error) {
	if len(specs) == 0 {
		return nil, nil, nil
	}
	hits := &tableHits{}
	var match []func(apply.Table) bool
	for _, s := range specs {
		for _, part := range strings.Split(s, ",") {
			part = strings.TrimSpace(part)
			m, err := apply.MatchTable(part)
			if err != nil {
				return nil, nil, usageErrorf("--table: %v", err)
			}
			match = append(match, m)
			hits.patterns = append(hits.patterns, part)
		}
	}
	hits.hit = make([]atomic.Bool, len(match))
	return func(t codec.TableName) bool {
		ok := false
		for i, m := range match {
			if m(apply.Table{Schema: t.Schema, Name: t.Name}) {
				hits.hit[i].Store(true)
				ok = true
			}
		}
		return ok
	}, hits, nil
}

// tableHits records which --table patterns matched an event of the range,
// so that one matching none is said, not passed over in silence.
type tableHits struct {
	patterns []string
	hit      []atomic.Bool
}

// unmatched returns the patterns that matched no event.
func (h *tableHits) unmatched() []string {
	if h == nil {
		return nil
	}
	var out []string
	for i, p := range h.patterns {
		if !h.hit[i].Load() {
			out = append(out, p)
		}
	}
	return out
}

func (a *app) dumpCmd() *cobra.Command {
	var (
		rf        rangeFlags
		tables    []string
		limit     int64
		keepDups  bool
		withTypes bool
	)
	cmd := &cobra.Command{
		Use:   "dump",
		Short: "Print the events of a range as JSON lines",
		Long: `dump prints the events of the range (start, end] in commit-ts order, one JSON
object a line, as a recovery would replay them: by default the range
(checkpoint ts, global resolved ts], with exact duplicates (rewrites after a
failover) dropped.

Each line has commit_ts, start_ts, op (insert, update, delete or ddl), table,
physical_id and segment (the object it came from); rows have "columns" (the
post image) and "old" (the pre image) as objects in column order; DDLs have
ddl_type, query and tables. commit_ts and start_ts are strings of digits, as
every ts in redokit's JSON: a TSO is above 2^53, which a JSON number read as a
double (jq, JavaScript) rounds. Values are JSON numbers, strings or null;
binary values are base64; decimals, dates, times and JSON documents are
strings.`,
		Example: `  redokit dump --storage file:///var/redo --log cf1 --table shop.orders | jq .columns
  redokit dump --storage s3://bucket/redo --log cf1 --start-ts 0 --end-ts 455000000000000000 --limit 10`,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{annStorage: "1", annLog: "1"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if limit < 0 {
				return usageErrorf("--limit %d: want a number of events, or 0 for no limit", limit)
			}
			filter, hits, err := tableFilter(tables)
			if err != nil {
				return err
			}
			b, _, start, end, err := rf.open(ctx, cmd, a)
			if err != nil {
				return err
			}
			defer b.Close()
			if start == end {
				return nil
			}
			r, err := openRange(ctx, b, a.logID, start, end, reader.Options{
				TableFilter: filter, KeepDuplicates: keepDups, Logger: a.logger(),
			})
			if err != nil {
				return err
			}
			defer r.Close()
			out := bufio.NewWriterSize(a.stdout, 256<<10)
			bar := a.rangeBar(start, end, "reading")
			var n int64
			var line []byte
			for {
				if limit > 0 && n >= limit {
					break
				}
				ev, err := r.Next(ctx)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					_ = out.Flush()
					return damageHint(err)
				}
				line = appendEventJSON(line[:0], ev, withTypes)
				line = append(line, '\n')
				if _, err := out.Write(line); err != nil {
					return err
				}
				n++
				if n%1024 == 0 {
					bar.update(ev.CommitTs(), n)
				}
			}
			bar.finish()
			if err := out.Flush(); err != nil {
				return err
			}
			if limit == 0 || n < limit {
				// The whole range was read: a pattern that matched
				// nothing is worth a word (a typo reads as an empty table).
				for _, p := range hits.unmatched() {
					fmt.Fprintf(cmd.ErrOrStderr(), "redokit dump: note: --table %q matched no event in (%d, %d]\n", p, start, end)
				}
			}
			return nil
		},
	}
	rf.register(cmd, "dump")
	f := cmd.Flags()
	f.StringSliceVar(&tables, "table", nil, "only events of the tables matching this schema.table `PATTERN` (shell globs: shop.*, *.orders; as apply --table); repeat or comma-separate for several")
	f.Int64Var(&limit, "limit", 0, "stop after this many events (0: no limit)")
	f.BoolVar(&keepDups, "keep-duplicates", false, "keep exact duplicates (the rewrites a failover leaves)")
	f.BoolVar(&withTypes, "types", false, "print each column as {\"type\":…, \"value\":…} with its MySQL type")
	return cmd
}

// appendEventJSON appends one event as a JSON object. It is written by hand
// so that columns keep their order and values keep their kind.
func appendEventJSON(b []byte, ev *reader.Event, withTypes bool) []byte {
	// The ts are strings of digits, as in every JSON the CLI prints (see
	// jsonts.go): a TSO is above what a double holds.
	b = append(b, `{"commit_ts":"`...)
	b = strconv.AppendUint(b, ev.CommitTs(), 10)
	b = append(b, `","start_ts":"`...)
	b = strconv.AppendUint(b, ev.StartTs(), 10)
	b = append(b, '"')
	t := ev.TableName()
	if ev.IsDDL() {
		b = append(b, `,"op":"ddl"`...)
	} else {
		b = append(b, `,"op":`...)
		b = appendString(b, ev.Row.Op().String())
	}
	b = appendTableName(b, t, true)
	b = append(b, `,"physical_id":`...)
	b = strconv.AppendInt(b, t.PhysicalID, 10)
	if t.IsPartition {
		b = append(b, `,"partition":true`...)
	}
	if ev.IsDDL() {
		d := &ev.DDL
		b = append(b, `,"ddl_type":`...)
		b = appendString(b, d.Type.String())
		b = append(b, `,"query":`...)
		b = appendString(b, d.Query)
		b = append(b, `,"tables":[`...)
		for i, dt := range d.Tables {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '{')
			b = appendTableName(b, dt.TableName, false)
			b = append(b, `,"physical_id":`...)
			b = strconv.AppendInt(b, dt.PhysicalID, 10)
			b = append(b, `,"role":`...)
			b = appendString(b, dt.Role.String())
			b = append(b, '}')
		}
		b = append(b, ']')
	} else {
		if len(ev.Row.Columns) > 0 {
			b = append(b, `,"columns":`...)
			b = appendColumns(b, ev.Row.Columns, withTypes)
		}
		if len(ev.Row.PreColumns) > 0 {
			b = append(b, `,"old":`...)
			b = appendColumns(b, ev.Row.PreColumns, withTypes)
		}
	}
	if ev.Source != nil {
		b = append(b, `,"segment":`...)
		b = appendString(b, ev.Source.Key)
	}
	return append(b, '}')
}

// appendTableName appends `"table":"schema.name"`, or `"schema":"name"`
// for a DDL of a whole schema (CREATE DATABASE), which names no table:
// "schema." would read as a table with an empty name.
func appendTableName(b []byte, t codec.TableName, comma bool) []byte {
	if comma {
		b = append(b, ',')
	}
	if t.Name == "" {
		b = append(b, `"schema":`...)
		return appendString(b, t.Schema)
	}
	b = append(b, `"table":`...)
	return appendString(b, t.String())
}

func appendColumns(b []byte, cols []codec.Column, withTypes bool) []byte {
	b = append(b, '{')
	for i, c := range cols {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, c.Name)
		b = append(b, ':')
		if withTypes {
			b = append(b, `{"type":`...)
			b = strconv.AppendUint(b, uint64(c.Type), 10)
			b = append(b, `,"value":`...)
			b = appendValue(b, c.Value)
			b = append(b, '}')
		} else {
			b = appendValue(b, c.Value)
		}
	}
	return append(b, '}')
}

func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // cannot fail for a string; escapes as JSON wants
	return append(b, q...)
}

func appendValue(b []byte, v codec.Value) []byte {
	switch v.Kind() {
	case codec.KindNull:
		return append(b, "null"...)
	case codec.KindInt:
		return strconv.AppendInt(b, v.Int(), 10)
	case codec.KindUint, codec.KindBit, codec.KindEnum, codec.KindSet:
		return strconv.AppendUint(b, v.Uint(), 10)
	case codec.KindYear:
		return strconv.AppendUint(b, uint64(v.Year()), 10)
	case codec.KindFloat32, codec.KindFloat64:
		f := v.Float64()
		bits := 64
		if v.Kind() == codec.KindFloat32 {
			f, bits = float64(v.Float32()), 32
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return appendString(b, strconv.FormatFloat(f, 'g', -1, bits))
		}
		return strconv.AppendFloat(b, f, 'g', -1, bits)
	case codec.KindBytes:
		q, _ := json.Marshal(v.Bytes()) // base64
		return append(b, q...)
	case codec.KindDecimal, codec.KindString, codec.KindJSON:
		return appendString(b, v.Text())
	case codec.KindDate:
		return appendString(b, v.DateTime().String()[:10])
	case codec.KindDatetime, codec.KindTimestamp:
		return appendString(b, v.DateTime().String())
	case codec.KindDuration:
		return appendString(b, v.Duration().String())
	}
	return appendString(b, v.String())
}
