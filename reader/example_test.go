package reader_test

import (
	"bytes"
	"context"
	"fmt"
	"log"

	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/reader"
	"github.com/redokit/redokit/segment"
)

// Two writers' segments, read back as one stream in commit-ts order: at ts 20
// the row comes before the DDL although the DDL's segment sorts first.
func Example() {
	ctx := context.Background()
	b := mem.New()
	defer b.Close()
	write := func(writerID string, events ...codec.Event) {
		var buf bytes.Buffer
		hdr := segment.Header{LogID: "orders-cf", WriterID: writerID, Epoch: 1, Seq: 1, Compression: segment.CompressionLZ4}
		w, err := segment.NewWriter(&buf, hdr, nil)
		if err != nil {
			log.Fatal(err)
		}
		for _, ev := range events {
			kind := segment.KindRow
			if ev.IsDDL() {
				kind = segment.KindDDL
			}
			if err := w.Append(ev.CommitTs(), kind, codec.AppendEvent(nil, &ev)); err != nil {
				log.Fatal(err)
			}
		}
		f, err := w.Seal()
		if err != nil {
			log.Fatal(err)
		}
		if _, err := b.Put(ctx, hdr.SealedName(f.MinTs, f.MaxTs).Format(), buf.Bytes(), nil); err != nil {
			log.Fatal(err)
		}
	}
	table := codec.TableName{Schema: "shop", Name: "orders", PhysicalID: 42}
	insert := func(ts uint64, id int64) codec.Event {
		return codec.Event{Kind: codec.RowEvent, Row: codec.RowChange{StartTs: ts - 1, CommitTs: ts, Table: table,
			Columns: []codec.Column{{Name: "id", Type: codec.TypeLonglong, Flags: codec.FlagPrimaryKey, Value: codec.IntValue(id)}}}}
	}
	alter := codec.Event{Kind: codec.DDLEvent, DDL: codec.DDL{StartTs: 19, CommitTs: 20, Table: table,
		Type: codec.ActionAddColumn, Query: "ALTER TABLE orders ADD note TEXT"}}
	write("capture-1", insert(10, 1), alter, insert(30, 3))
	write("capture-2", insert(15, 2), insert(20, 4))

	r, err := reader.Open(ctx, b, &reader.Options{LogID: "orders-cf", StartTs: 0, EndTs: 25})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	for ev, err := range r.Events(ctx) {
		if err != nil {
			log.Fatal(err)
		}
		if ev.IsDDL() {
			fmt.Println(ev.CommitTs(), "ddl", ev.DDL.Query, "from", ev.Source.Name.WriterID)
		} else {
			fmt.Println(ev.CommitTs(), "row", ev.Row.Columns[0].Value.Int(), "from", ev.Source.Name.WriterID)
		}
	}
	// Output:
	// 10 row 1 from capture-1
	// 15 row 2 from capture-2
	// 20 row 4 from capture-2
	// 20 ddl ALTER TABLE orders ADD note TEXT from capture-1
}
