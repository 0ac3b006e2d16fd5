package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/codec"
)

// conflictReport is what the replay met downstream (the sink's
// apply.Conflicts) with the rows it skipped as already applied, per table
// (apply.Result.SkippedRows): what the replay did to each table. Its table
// list is never null in JSON.
func conflictReport(c apply.Conflicts, res *apply.Result) *apply.Conflicts {
	if res != nil {
		c = c.WithSkipped(res.SkippedRows)
	}
	if c.Tables == nil {
		c.Tables = []apply.TableConflicts{}
	}
	return &c
}

// printConflicts prints the conflict report: the totals, then each table
// with a count.
func printConflicts(w io.Writer, c *apply.Conflicts) {
	if c == nil {
		return
	}
	fmt.Fprintf(w, "conflicts\t%d rows replaced over a stale unique value; %d deletes matched no row; %d rows inserted into a table without a key where an identical row was there already\n",
		c.Replaced, c.DeletesMissed, c.DuplicatedKeyless)
	for _, t := range c.Tables {
		fmt.Fprintf(w, "  %s.%s\t%d skipped as already applied, %d replaced, %d deletes missed, %d duplicated (no key)\n",
			t.Schema, t.Table, t.Skipped, t.Replaced, t.DeletesMissed, t.DuplicatedKeyless)
	}
	if c.DuplicatedKeyless > 0 {
		fmt.Fprintf(w, "\ta table without a key cannot tell a replayed insert from a second identical one: the downstream held rows its own sink wrote past the log's checkpoint, and these tables may now hold such a row twice (at most the count above)\n")
	}
}

// filterHint makes the apply.FilterBoundaryError a filtered source yields
// say which flags go on from it (see boundaryError).
func filterHint(src apply.Source, exclude []string) apply.Source {
	return func(yield func(*codec.Event, error) bool) {
		for ev, err := range src {
			var fb *apply.FilterBoundaryError
			if errors.As(err, &fb) {
				err = &boundaryError{fb, exclude}
			}
			if !yield(ev, err) {
				return
			}
		}
	}
}

// boundaryError is an apply.FilterBoundaryError in redokit apply's words:
// the DDL, its commit ts, the tables on each side, and the exact flags that
// go on.
type boundaryError struct {
	e       *apply.FilterBoundaryError
	exclude []string
}

func (b *boundaryError) Unwrap() error { return b.e }

func (b *boundaryError) Error() string {
	e := b.e
	var s strings.Builder
	fmt.Fprintf(&s, "apply: %v: DDL at commit ts %d %q ", apply.ErrFilterBoundary, e.CommitTs, e.Query)
	side := func(sel bool) string {
		if sel {
			return "selected"
		}
		return "not selected"
	}
	if len(e.Renames) > 0 {
		for i, r := range e.Renames {
			if i > 0 {
				s.WriteString(", ")
			}
			fmt.Fprintf(&s, "renames %s (%s) to %s (%s)", r.From, side(r.FromSelected), r.To, side(!r.FromSelected))
		}
	} else {
		fmt.Fprintf(&s, "touches selected tables %v and tables not selected %v", e.Selected, e.NotSelected)
	}
	s.WriteString(". The --table/--exclude-table filter cannot follow it by itself, and a run with the same flags stops here again. To go on, either:\n")
	if e.CommitTs > 0 {
		fmt.Fprintf(&s, "  --end-ts %d: apply everything before it, and stop there;\n", e.CommitTs-1)
	}
	widen := b.widen()
	if e.Follows() {
		fmt.Fprintf(&s, "  or %s: the rename is applied, and the table's rows after it follow it under its new name (keep the flags in every later run into this downstream).", widen)
	} else {
		fmt.Fprintf(&s, "  or %s, but only once the downstream holds %s as the log has them at commit ts %d (restore them there, or apply the log from where they begin, with them selected, into a fresh downstream): "+
			"the filter left them out so far, the DDL needs them, and a resumed apply skips their rows below the progress it recorded without them.",
			widen, tableNames(e.Needs()), e.CommitTs-1)
	}
	return s.String()
}

// widen is the flags that select the DDL's unselected tables: a --table of
// each, and the removal of each --exclude-table that excludes one.
func (b *boundaryError) widen() string {
	var add []string
	for _, t := range b.e.NotSelected {
		add = append(add, "--table "+shellWord(globEscape(t.Schema)+"."+globEscape(t.Name)))
	}
	s := "add " + strings.Join(add, " ")
	var drop []string
	for _, p := range b.exclude {
		m, err := apply.MatchTable(p)
		if err != nil {
			continue
		}
		for _, t := range b.e.NotSelected {
			if m(t) {
				drop = append(drop, "--exclude-table "+shellWord(p))
				break
			}
		}
	}
	if len(drop) > 0 {
		s += " and drop " + strings.Join(drop, " ")
	}
	return s
}

func tableNames(ts []apply.Table) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = t.String()
	}
	return strings.Join(s, ", ")
}

// globEscape escapes the characters a --table pattern reads as a glob.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

var shellPlain = regexp.MustCompile(`^[A-Za-z0-9_.,:/=@%+-]+$`)

// shellWord quotes s for a POSIX shell when it needs it.
func shellWord(s string) string {
	if shellPlain.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// MarshalJSON adds "exit_code" to the summary of an apply that failed, as
// every --json failure has it: the summary stands in for the error object
// (see the package doc), so a script that reads exit_code must find it here
// too (issue 29, item 7: apply --json failures lacked it).
func (s applySummary) MarshalJSON() ([]byte, error) {
	type plain applySummary // its fields and tags, not this method
	if s.Error == "" {
		return json.Marshal(plain(s))
	}
	return json.Marshal(struct {
		plain
		ExitCode int `json:"exit_code"`
	}{plain(s), exitError})
}
