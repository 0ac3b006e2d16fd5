package sqlsink_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/internal/sqlsink"
	"github.com/redokit/redokit/codec"
)

const benchTables = 4

// benchEvents is a replication-like log: 4 tables of 7 columns, transactions
// of 1–16 rows over 1–2 tables, 80 % inserts, 15 % updates, 5 % deletes.
func benchEvents(schema string, rows int) []*codec.Event {
	rng := rand.New(rand.NewPCG(1, 2))
	tables := []string{"orders", "items", "users", "events"}[:benchTables]
	var evs []*codec.Event
	ts := uint64(1000)
	for _, t := range tables {
		evs = append(evs, ddlEv(ts, schema, t, codec.ActionCreateTable, "CREATE TABLE "+t+
			" (id BIGINT NOT NULL PRIMARY KEY, a BIGINT, b VARCHAR(64), c DOUBLE, d DATETIME(6), e VARCHAR(255), f DECIMAL(12,2))"))
		ts++
	}
	live := map[string][]int64{}
	next := int64(1)
	image := func(id int64) []codec.Column {
		return []codec.Column{
			icol("id", id, pk), icol("a", rng.Int64N(1e9), codec.FlagNullable), scol("b", fmt.Sprintf("customer-%d", rng.IntN(1e6))),
			{Name: "c", Type: codec.TypeDouble, Flags: codec.FlagNullable, Value: codec.Float64Value(rng.Float64() * 1000)},
			{Name: "d", Type: codec.TypeDatetime, Flags: codec.FlagNullable, Value: codec.DatetimeValue(dt(2025, 6, 1, 12, uint8(rng.IntN(60)), uint8(rng.IntN(60)), uint32(rng.IntN(1e6)), 6))},
			scol("e", fmt.Sprintf("a somewhat longer text column with some payload in it, row %d", id)),
			{Name: "f", Type: codec.TypeNewDecimal, Flags: codec.FlagNullable, Value: codec.DecimalValue(fmt.Sprintf("%d.%02d", rng.IntN(1e6), rng.IntN(100)))},
		}
	}
	n := 0
	for n < rows {
		ts += 1 + uint64(rng.IntN(3))
		size := 1 + rng.IntN(16)
		t1, t2 := tables[rng.IntN(4)], tables[rng.IntN(4)]
		touched := map[int64]bool{}
		for i := 0; i < size && n < rows; i++ {
			t := t1
			if i%2 == 1 {
				t = t2
			}
			ids := live[t]
			r := rng.IntN(100)
			switch {
			case r < 80 || len(ids) < 10:
				id := next
				next++
				touched[id] = true
				live[t] = append(ids, id)
				evs = append(evs, rowEv(ts, schema, t, nil, image(id)))
			case r < 95:
				k := rng.IntN(len(ids))
				if touched[ids[k]] {
					continue
				}
				touched[ids[k]] = true
				evs = append(evs, rowEv(ts, schema, t, image(ids[k]), image(ids[k])))
			default:
				k := rng.IntN(len(ids))
				if touched[ids[k]] {
					continue
				}
				touched[ids[k]] = true
				evs = append(evs, rowEv(ts, schema, t, image(ids[k]), nil))
				live[t] = append(ids[:k], ids[k+1:]...)
			}
			n++
		}
	}
	return evs
}

// BenchmarkApply measures rows per second into SQLite (and MariaDB when
// REDOKIT_MYSQL_DSN is set): apply.Run with its defaults, and the naive
// one-statement-per-row autocommit loop over the same events. Each iteration
// applies both, one after the other into fresh databases, so that a noisy
// machine slows both alike; it reports both rates and their ratio.
func BenchmarkApply(b *testing.B) {
	const rows = 20000
	for _, d := range []sqlsink.Dialect{sqlsink.SQLite, sqlsink.MySQL} {
		b.Run(d.String(), func(b *testing.B) {
			if d == sqlsink.MySQL {
				mysqlDSN(b)
			}
			ctx := context.Background()
			var took [2]time.Duration
			var applied [2]int
			for i := 0; i < b.N; i++ {
				for mode := range 2 {
					b.StopTimer()
					e := newEnv(b, d)
					events := benchEvents(e.schema, rows)
					s := e.open(nil)
					// The tables are created untimed: DDLs cost both
					// sides the same, and the benchmark is about rows.
					if _, err := sqlsink.NaiveApply(ctx, s, events[:benchTables]); err != nil {
						b.Fatal(err)
					}
					events = events[benchTables:]
					b.StartTimer()
					start := time.Now()
					if mode == 0 {
						res, err := apply.Run(ctx, sliceSource(events), s, nil)
						if err != nil {
							b.Fatal(err)
						}
						applied[0] += int(res.Rows)
					} else {
						n, err := sqlsink.NaiveApply(ctx, s, events)
						if err != nil {
							b.Fatal(err)
						}
						applied[1] += n
					}
					took[mode] += time.Since(start)
				}
			}
			run := float64(applied[0]) / took[0].Seconds()
			naive := float64(applied[1]) / took[1].Seconds()
			b.ReportMetric(run, "run-rows/s")
			b.ReportMetric(naive, "naive-rows/s")
			b.ReportMetric(run/naive, "speedup")
		})
	}
}

// TestNaiveBaselineAgrees: the baseline applies the benchmark's events to the
// same state as apply.Run, so the comparison is between equals.
func TestNaiveBaselineAgrees(t *testing.T) {
	forEachDialect(t, func(t *testing.T, e *env) {
		events := benchEvents(e.schema, 2000)
		e.run(events, nil)
		want := e.dumpAll("orders", "items", "users", "events")
		e2 := newEnv(t, e.dialect)
		if _, err := sqlsink.NaiveApply(context.Background(), e2.open(nil), benchEvents(e2.schema, 2000)); err != nil {
			t.Fatal(err)
		}
		for tb, rows := range e2.dumpAll("orders", "items", "users", "events") {
			if len(rows) == 0 || fmt.Sprint(rows) != fmt.Sprint(want[tb]) {
				t.Errorf("%s: naive %d rows, apply.Run %d rows (or they differ)", tb, len(rows), len(want[tb]))
			}
		}
	})
}
