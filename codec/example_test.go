package codec_test

import (
	"errors"
	"fmt"

	"github.com/redokit/redokit/codec"
)

func Example() {
	ev := &codec.Event{Kind: codec.RowEvent, Row: codec.RowChange{
		StartTs: 1000, CommitTs: 1002,
		Table: codec.TableName{Schema: "db", Name: "t", PhysicalID: 42},
		Columns: []codec.Column{
			{Name: "id", Type: codec.TypeLong, Flags: codec.FlagPrimaryKey | codec.FlagHandleKey, Value: codec.IntValue(-3)},
			{Name: "v", Type: codec.TypeVarchar, Flags: codec.FlagNullable, Charset: "utf8mb4", Value: codec.StringValue("hi")},
		},
	}}
	buf := codec.AppendEvent(nil, ev)
	fmt.Printf("%d bytes: % x\n", len(buf), buf[:12])

	// A reader decodes every event of a stream into one Event.
	var got codec.Event
	if err := codec.DecodeEvent(buf, &got); err != nil {
		panic(err)
	}
	fmt.Println(got.Row.Op(), got.TableName(), got.CommitTs(), got.Row.Columns[0].Value, got.Row.Columns[1].Value)

	buf[0] = 9 // a format from the future
	err := codec.DecodeEvent(buf, &got)
	fmt.Println(errors.Is(err, codec.ErrUnknownVersion), err)
	// Output:
	// 43 bytes: 01 01 ea 03 00 00 00 00 00 00 02 02
	// insert db.t 1002 int(-3) string("hi")
	// true codec: decode event: version at offset 0: unknown event format version 9 (this reader knows version 1)
}
