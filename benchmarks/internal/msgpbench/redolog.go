// Package msgpbench holds a msgp-encoded record in the shape of TiCDC's redo
// log row event, so that its benchmarks can compare redokit's encoding
// with the one TiCDC uses. It exists only for those benchmarks.
//
// The field keys and nesting follow TiCDC's public format (a RedoLog with a
// row or a DDL; column metadata and column values in separate arrays; values
// as msgpack "any"); the Go code is ours. redolog_gen.go is generated:
//
//	go generate ./benchmarks/internal/msgpbench
package msgpbench

//go:generate go run github.com/tinylib/msgp@v1.6.5 -file redolog.go -o redolog_gen.go -tests=false

// RedoLog is one record: a row change or a DDL, as Type says.
type RedoLog struct {
	RedoRow RedoRowEvent `msg:"row"`
	RedoDDL RedoDDLEvent `msg:"ddl"`
	Type    uint8        `msg:"type"` // 1 row, 2 DDL
}

// RedoRowEvent is a row change: metadata in Row, values beside it.
type RedoRowEvent struct {
	Row        *RowInRedoLog `msg:"row"`
	Columns    []ColumnValue `msg:"columns"`
	PreColumns []ColumnValue `msg:"pre-columns"`
}

// RowInRedoLog is the metadata of a row change.
type RowInRedoLog struct {
	StartTs      uint64        `msg:"start-ts"`
	CommitTs     uint64        `msg:"commit-ts"`
	Table        *TableName    `msg:"table"`
	Columns      []*ColumnMeta `msg:"columns"`
	PreColumns   []*ColumnMeta `msg:"pre-columns"`
	IndexColumns [][]int       `msg:"index-columns"`
}

// TableName names the table of an event by its physical ID.
type TableName struct {
	Schema      string `msg:"db-name"`
	Table       string `msg:"tbl-name"`
	TableID     int64  `msg:"tbl-id"`
	IsPartition bool   `msg:"is-partition"`
}

// ColumnMeta describes one column.
type ColumnMeta struct {
	Name      string `msg:"name"`
	Type      byte   `msg:"type"`
	Charset   string `msg:"charset"`
	Collation string `msg:"collation"`
}

// ColumnValue is one value. msgp cannot tell an empty byte slice from nil,
// hence the extra flag.
type ColumnValue struct {
	Value             any    `msg:"column"`
	ValueIsEmptyBytes bool   `msg:"value-is-empty-bytes"`
	Flag              uint64 `msg:"flag"`
}

// RedoDDLEvent is a DDL.
type RedoDDLEvent struct {
	DDL       *DDLInRedoLog `msg:"ddl"`
	Type      byte          `msg:"type"`
	TableName TableName     `msg:"table-name"`
}

// DDLInRedoLog is the body of a DDL.
type DDLInRedoLog struct {
	StartTs  uint64 `msg:"start-ts"`
	CommitTs uint64 `msg:"commit-ts"`
	Query    string `msg:"query"`
}
