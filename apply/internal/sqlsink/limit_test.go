package sqlsink_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/backends/local"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/reader"
	"github.com/redokit/redokit/testkit/testenv"
	"github.com/redokit/redokit/writer"

	_ "github.com/redokit/redokit/apply/sqlite"
)

const limitLog = "big-tx"

// writeBigTx writes a redo log into dir holding one table's creation and
// one transaction of txn bytes at one commit ts: rows of about 1 KiB, a
// bulk load.
func writeBigTx(ctx context.Context, dir string, txn int64) (rows int64, err error) {
	b, err := local.New(dir, &local.Options{CreateDir: true})
	if err != nil {
		return 0, err
	}
	defer b.Close()
	w, err := writer.Open(ctx, b, &writer.Options{LogID: limitLog, WriterID: "w", MemoryQuota: 16 << 20})
	if err != nil {
		return 0, err
	}
	if err := w.AddSpan(1, 0); err != nil {
		return 0, err
	}
	table := codec.TableName{Schema: "db", Name: "big", PhysicalID: 1}
	create := codec.Event{Kind: codec.DDLEvent, DDL: codec.DDL{StartTs: 9, CommitTs: 10, Table: table, Type: codec.ActionCreateTable,
		Query: "CREATE TABLE big (k BIGINT PRIMARY KEY, pad TEXT)"}}
	if err := w.Write(ctx, 1, create); err != nil {
		return 0, err
	}
	pad := strings.Repeat("0123456789abcdef", 64)
	batch := make([]codec.Event, 64)
	for written := int64(0); written < txn; {
		for i := range batch {
			batch[i] = codec.Event{Kind: codec.RowEvent, Row: codec.RowChange{StartTs: 19, CommitTs: 20, Table: table,
				Columns: []codec.Column{
					{Name: "k", Type: codec.TypeLonglong, Flags: codec.FlagPrimaryKey | codec.FlagHandleKey, Value: codec.IntValue(rows)},
					{Name: "pad", Type: codec.TypeBlob, Value: codec.StringValue(pad)}}}}
			written += int64(codec.EncodedLen(&batch[i]))
			rows++
		}
		if err := w.Write(ctx, 1, batch...); err != nil {
			return 0, err
		}
	}
	if err := w.AdvanceResolved(1, 20); err != nil {
		return 0, err
	}
	return rows, w.Close(ctx)
}

// The child's side of TestApplyUnderDataLimit: the test binary limits its
// own data size, reads the log in its first argument and applies it into
// the SQLite file in its second with SplitBytes of its third (MiB), and
// prints what it applied and its memory.
func init() {
	testenv.RunChild("apply-data-limit", func(args []string) error {
		if len(args) != 4 {
			return fmt.Errorf("want the log's directory, the database, SplitBytes and the limit (MiB), got %q", args)
		}
		split, err1 := strconv.ParseInt(args[2], 10, 64)
		limit, err2 := strconv.ParseInt(args[3], 10, 64)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("bad sizes %q", args[2:])
		}
		idle := testenv.ProcStatus("VmRSS")
		if limit > 0 {
			if err := syscall.Setrlimit(syscall.RLIMIT_DATA, &syscall.Rlimit{Cur: uint64(limit << 20), Max: uint64(limit << 20)}); err != nil {
				return fmt.Errorf("set RLIMIT_DATA: %w", err)
			}
		}
		ctx := context.Background()
		b, err := local.New(args[0], nil)
		if err != nil {
			return err
		}
		defer b.Close()
		r, err := reader.Open(ctx, b, &reader.Options{LogID: limitLog, StartTs: 0, EndTs: 20})
		if err != nil {
			return err
		}
		defer r.Close()
		s, err := apply.Open(ctx, "sqlite://"+args[1], nil)
		if err != nil {
			return err
		}
		defer s.Close()
		res, err := apply.Run(ctx, r.CodecEvents(ctx), s, &apply.Options{SplitBytes: split << 20})
		if err != nil {
			return err
		}
		fmt.Printf("rows %d splits %d peakrows %d idle %d peak %d data %d\n", res.Rows, res.Splits, res.PeakRows, idle, testenv.ProcStatus("VmHWM"), testenv.ProcStatus("VmData"))
		return nil
	})
}

// TestApplyUnderDataLimit: a recovery that replays one transaction far
// larger than its memory, read from the log and applied into SQLite, in a
// process whose data size is limited to 448 MiB, completes, every row
// there — and under the same limit, holding the transaction whole, it
// dies: the crash loop TiCDC's redo apply meets (tiflow #5938).
// REDOKIT_APPLY_LIMIT_TXN_MIB sets the transaction's size (default 384).
func TestApplyUnderDataLimit(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("RLIMIT_DATA and /proc/self/status are Linux's")
	}
	if raceEnabled {
		t.Skip("measures memory: run without -race (scripts/test.sh does)")
	}
	txn := int64(testenv.Count(t, "REDOKIT_APPLY_LIMIT_TXN_MIB", 384))
	const split = 8
	// SQLite's page cache is 64 MiB, and its allocator (modernc) keeps
	// about as much again over a large transaction; the Go runtime and the
	// reader take about 60 MiB: the peak RSS of the apply in parts is
	// about 200 MiB whatever the transaction's size (192 and 400 MiB
	// measured), and its data size (virtual, threads' stacks included,
	// which the limit counts) about 320 MiB.
	limit := 448
	logDir := t.TempDir()
	rows, err := writeBigTx(context.Background(), logDir, txn<<20)
	if err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, split int64) (string, error) {
		c := testenv.StartChild(t, "apply-data-limit", []string{logDir, filepath.Join(t.TempDir(), "down.db"), fmt.Sprint(split), fmt.Sprint(limit)})
		var last string
		for line := range c.Lines {
			last = line
		}
		err := c.Wait()
		if err != nil {
			return c.Stderr(), err
		}
		return last, nil
	}
	t.Run("in parts", func(t *testing.T) {
		last, err := run(t, split)
		if err != nil {
			t.Fatalf("child: %v\n%s", err, last)
		}
		var got, splits, peakRows, idle, peak, data int64
		if _, err := fmt.Sscanf(last, "rows %d splits %d peakrows %d idle %d peak %d data %d", &got, &splits, &peakRows, &idle, &peak, &data); err != nil {
			t.Fatalf("child said %q: %v", last, err)
		}
		t.Logf("a %d MiB transaction of %d rows under a %d MiB data limit: %d splits, up to %d rows held, RSS idle %d MiB, peak %d MiB, data size at the end %d MiB", txn, rows, limit, splits, peakRows, idle>>20, peak>>20, data>>20)
		if got != rows || splits == 0 {
			t.Fatalf("applied %d rows of %d with %d splits", got, rows, splits)
		}
	})
	t.Run("whole", func(t *testing.T) {
		out, err := run(t, 1<<20)
		if err == nil {
			t.Fatalf("holding the %d MiB transaction whole under a %d MiB data limit succeeded: the limit proves nothing", txn, limit)
		}
		if !strings.Contains(out, "out of memory") && !strings.Contains(out, "cannot allocate memory") {
			t.Fatalf("holding it whole failed otherwise than out of memory: %v\n%s", err, out)
		}
	})
}
