package apply_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/sqlite" // registers sqlite: with apply.Open
	"github.com/redokit/redokit/codec"
)

// Replaying a few events held in memory into a SQLite file, twice: the
// second run finds them in the sink's progress and skips them. A log is
// replayed the same way with (*reader.Reader).CodecEvents as the source.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "apply-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	orders := codec.TableName{Schema: "shop", Name: "orders"}
	insert := func(ts uint64, id int64, note string) codec.Event {
		return codec.Event{Kind: codec.RowEvent, Row: codec.RowChange{StartTs: ts - 1, CommitTs: ts, Table: orders,
			Columns: []codec.Column{
				{Name: "id", Type: codec.TypeLonglong, Flags: codec.FlagPrimaryKey, Value: codec.IntValue(id)},
				{Name: "note", Type: codec.TypeVarchar, Value: codec.StringValue(note)},
			}}}
	}
	events := []codec.Event{
		{Kind: codec.DDLEvent, DDL: codec.DDL{StartTs: 9, CommitTs: 10, Table: orders, Type: codec.ActionCreateTable,
			Query: "CREATE TABLE orders (id BIGINT NOT NULL PRIMARY KEY, note VARCHAR(64)) ENGINE=InnoDB"}},
		insert(20, 1, "first"),
		insert(20, 2, "second"),
		insert(30, 1, "first, updated"),
	}

	uri := "sqlite://" + filepath.Join(dir, "replica.db")
	for range 2 {
		sink, err := apply.Open(ctx, uri, nil)
		if err != nil {
			log.Fatal(err)
		}
		res, err := apply.Run(ctx, apply.SliceSource(events), sink, nil)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("events %d, rows %d, DDLs %d, skipped %d\n", res.Events, res.Rows, res.DDLs, res.Skipped)
		sink.Close()
	}

	// The sink package's own Open gives its database, to look.
	s, err := sqlite.Open(ctx, uri, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	rows, err := s.DB().QueryContext(ctx, "SELECT id, note FROM orders ORDER BY id")
	if err != nil {
		log.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var note string
		if err := rows.Scan(&id, &note); err != nil {
			log.Fatal(err)
		}
		fmt.Println(id, note)
	}
	// Output:
	// events 4, rows 3, DDLs 1, skipped 0
	// events 4, rows 0, DDLs 0, skipped 4
	// 1 first, updated
	// 2 second
}
