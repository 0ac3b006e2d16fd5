// Package codectest builds the codec events that tests write and read: a
// row change or a DDL at a commit ts (its start ts one below), on a table,
// from a few column builders. It is for tests; the codec's own rules are
// codec's.
package codectest

import "github.com/redokit/redokit/codec"

// Table names the table schema.name with its physical ID.
func Table(schema, name string, physicalID int64) codec.TableName {
	return codec.TableName{Schema: schema, Name: name, PhysicalID: physicalID}
}

// Row is a row change at commit ts (start ts ts-1) on table: an insert of
// cols.
func Row(ts uint64, table codec.TableName, cols ...codec.Column) codec.Event {
	return codec.Event{Kind: codec.RowEvent, Row: codec.RowChange{StartTs: ts - 1, CommitTs: ts, Table: table, Columns: cols}}
}

// Update is a row change at commit ts on table from pre to post.
func Update(ts uint64, table codec.TableName, pre, post []codec.Column) codec.Event {
	ev := Row(ts, table, post...)
	ev.Row.PreColumns = pre
	return ev
}

// DDL is a DDL at commit ts (start ts ts-1) on table, of action, with
// query; affected are the tables it names, if the test needs them.
func DDL(ts uint64, table codec.TableName, action codec.ActionType, query string, affected ...codec.DDLTable) codec.Event {
	return codec.Event{Kind: codec.DDLEvent, DDL: codec.DDL{StartTs: ts - 1, CommitTs: ts, Table: table, Type: action, Query: query, Tables: affected}}
}

// Affected names table as one that a DDL alters (codec.RoleAffected).
func Affected(table codec.TableName) codec.DDLTable {
	return codec.DDLTable{TableName: table, Role: codec.RoleAffected}
}

// Int is a BIGINT column.
func Int(name string, v int64, flags codec.ColumnFlag) codec.Column {
	return codec.Column{Name: name, Type: codec.TypeLonglong, Flags: flags, Value: codec.IntValue(v)}
}

// Key is a BIGINT primary-key column.
func Key(name string, v int64) codec.Column { return Int(name, v, codec.FlagPrimaryKey) }

// Str is a VARCHAR column.
func Str(name, v string) codec.Column {
	return codec.Column{Name: name, Type: codec.TypeVarchar, Value: codec.StringValue(v)}
}
