package codec

import (
	"strconv"
	"strings"
)

// EventKind says whether an Event is a row change or a DDL. The numbers are
// the wire codes.
type EventKind uint8

// Event kinds. The zero EventKind is not a kind: AppendEvent panics on it.
const (
	RowEvent EventKind = 1
	DDLEvent EventKind = 2
)

func (k EventKind) String() string {
	switch k {
	case RowEvent:
		return "row"
	case DDLEvent:
		return "ddl"
	}
	return "event-kind(" + strconv.Itoa(int(k)) + ")"
}

// Event is one record of a redo log: a row change or a DDL. Both parts are
// held inline, so that one Event can be decoded into again and again without
// allocating; only the part Kind names is meaningful, and DecodeEvent clears
// the other.
type Event struct {
	Kind EventKind
	Row  RowChange // when Kind == RowEvent
	DDL  DDL       // when Kind == DDLEvent

	// buf holds a copy of the encoded event that the byte payloads of the
	// decoded values point into. It is reused by the next DecodeEvent.
	buf []byte
	// names remembers the table names DecodeEvent allocated for this Event,
	// so that events of a few tables, interleaved, reuse them. Allocated by
	// the first name change; Clone does not copy it.
	names *nameRing
}

// CommitTs returns the commit timestamp of the row change or DDL.
func (e *Event) CommitTs() uint64 {
	if e.Kind == DDLEvent {
		return e.DDL.CommitTs
	}
	return e.Row.CommitTs
}

// StartTs returns the start timestamp of the row change or DDL.
func (e *Event) StartTs() uint64 {
	if e.Kind == DDLEvent {
		return e.DDL.StartTs
	}
	return e.Row.StartTs
}

// IsDDL reports whether e is a DDL.
func (e *Event) IsDDL() bool { return e.Kind == DDLEvent }

// TableName returns the table of a row change, or the table a DDL names
// (for a schema-level DDL only Schema is set).
func (e *Event) TableName() TableName {
	if e.Kind == DDLEvent {
		return e.DDL.Table
	}
	return e.Row.Table
}

// Equal reports whether e and o hold the same event: the same kind and the
// same fields of that kind, values compared with Value.Equal. A nil and an
// empty column or table list are equal (the wire cannot tell them apart).
func (e *Event) Equal(o *Event) bool {
	if e.Kind != o.Kind {
		return false
	}
	switch e.Kind {
	case RowEvent:
		a, b := &e.Row, &o.Row
		return a.StartTs == b.StartTs && a.CommitTs == b.CommitTs && a.Table == b.Table &&
			columnsEqual(a.Columns, b.Columns) && columnsEqual(a.PreColumns, b.PreColumns)
	case DDLEvent:
		a, b := &e.DDL, &o.DDL
		if a.StartTs != b.StartTs || a.CommitTs != b.CommitTs || a.Table != b.Table ||
			a.Type != b.Type || a.Query != b.Query || len(a.Tables) != len(b.Tables) {
			return false
		}
		for i := range a.Tables {
			if a.Tables[i] != b.Tables[i] {
				return false
			}
		}
		return true
	}
	return true
}

func columnsEqual(a, b []Column) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := &a[i], &b[i]
		if x.Name != y.Name || x.Type != y.Type || x.Flags != y.Flags || x.Charset != y.Charset ||
			x.Collation != y.Collation || !x.Value.Equal(y.Value) {
			return false
		}
	}
	return true
}

// Clone returns a deep copy of e that shares no memory with it, for keeping
// an event beyond the next DecodeEvent into e.
func (e *Event) Clone() *Event {
	c := &Event{Kind: e.Kind, Row: e.Row, DDL: e.DDL}
	// One arena for every byte payload of the copy.
	arena := make([]byte, 0, rowBytes(&e.Row))
	c.Row.Columns, arena = copyColumns(nil, e.Row.Columns, arena)
	c.Row.PreColumns, _ = copyColumns(nil, e.Row.PreColumns, arena)
	if e.DDL.Tables != nil {
		c.DDL.Tables = append([]DDLTable(nil), e.DDL.Tables...)
	}
	return c
}

// CopyRow makes dst a deep copy of src that shares no memory with it,
// reusing dst's column slices and arena (the byte payloads' memory, which
// CopyRow returns and the caller keeps beside dst for the next CopyRow
// into it): a consumer that keeps rows past the decoder's next event, and
// then lets them go, recycles their memory instead of allocating per row.
func CopyRow(dst, src *RowChange, arena []byte) []byte {
	if n := rowBytes(src); cap(arena) < n {
		arena = make([]byte, 0, n)
	}
	arena = arena[:0]
	cols, pre := dst.Columns, dst.PreColumns
	*dst = *src
	dst.Columns, arena = copyColumns(cols, src.Columns, arena)
	dst.PreColumns, arena = copyColumns(pre, src.PreColumns, arena)
	return arena
}

// rowBytes is the size of r's byte payloads.
func rowBytes(r *RowChange) int {
	n := 0
	for _, cols := range [2][]Column{r.Columns, r.PreColumns} {
		for i := range cols {
			n += len(cols[i].Value.Bytes())
		}
	}
	return n
}

// copyColumns copies src into dst[:0] (nil when src is), each byte payload
// appended to arena, which must have room for them all: the copies' slices
// point into it.
func copyColumns(dst, src []Column, arena []byte) ([]Column, []byte) {
	if src == nil {
		return nil, arena
	}
	if dst == nil {
		dst = make([]Column, 0, len(src))
	}
	dst = append(dst[:0], src...)
	for i := range dst {
		v := &dst[i].Value
		if v.kind.hasBytes() {
			start := len(arena)
			arena = append(arena, v.b...)
			v.b = arena[start:len(arena):len(arena)]
		}
	}
	return dst, arena
}

// TableName identifies a table, or one partition of a partitioned table.
type TableName struct {
	Schema string
	Name   string
	// PhysicalID is the ID of the storage the rows live in: the table ID, or
	// the partition ID when IsPartition is set.
	PhysicalID  int64
	IsPartition bool
}

// String returns "schema.name".
func (t TableName) String() string { return t.Schema + "." + t.Name }

// Op is the operation a row change performs, derived from which images it has.
type Op uint8

// Row operations.
const (
	OpNone   Op = iota // neither image: not a row operation
	OpInsert           // post image only
	OpUpdate           // pre and post image
	OpDelete           // pre image only
)

func (o Op) String() string {
	switch o {
	case OpInsert:
		return "insert"
	case OpUpdate:
		return "update"
	case OpDelete:
		return "delete"
	}
	return "none"
}

// RowChange is one row changed by a transaction. An insert has only the post
// image (Columns), a delete only the pre image (PreColumns), an update both,
// each complete (every column of the row, not only the changed ones).
type RowChange struct {
	StartTs    uint64
	CommitTs   uint64
	Table      TableName
	Columns    []Column // post image
	PreColumns []Column // pre image
}

// Op says whether r is an insert, an update or a delete.
func (r *RowChange) Op() Op {
	switch {
	case len(r.Columns) > 0 && len(r.PreColumns) > 0:
		return OpUpdate
	case len(r.Columns) > 0:
		return OpInsert
	case len(r.PreColumns) > 0:
		return OpDelete
	}
	return OpNone
}

// Column is one column of a row image: its definition as far as a sink needs
// it, and its value.
type Column struct {
	Name      string
	Type      Type // MySQL type code
	Flags     ColumnFlag
	Charset   string // e.g. "utf8mb4"; empty where it does not apply
	Collation string // e.g. "utf8mb4_bin"; empty where it does not apply
	Value     Value
}

// ColumnFlag is a bitset of column properties. The bits are the wire format.
type ColumnFlag uint8

// Column flags. The most common ones take the low bits.
const (
	FlagNullable    ColumnFlag = 1 << iota // may hold NULL
	FlagPrimaryKey                         // part of the primary key
	FlagHandleKey                          // part of the key a sink uses to find the row
	FlagUniqueKey                          // part of a unique key
	FlagMultipleKey                        // part of a non-unique index
	FlagUnsigned                           // an UNSIGNED number
	FlagBinary                             // binary collation or type
	FlagGenerated                          // a generated column
)

var flagNames = [...]string{"nullable", "primary-key", "handle-key", "unique-key", "multiple-key",
	"unsigned", "binary", "generated"}

// Has reports whether every flag of g is set in f.
func (f ColumnFlag) Has(g ColumnFlag) bool { return f&g == g }

func (f ColumnFlag) String() string {
	if f == 0 {
		return "0"
	}
	var parts []string
	for i, name := range flagNames {
		if f&(1<<i) != 0 {
			parts = append(parts, name)
		}
	}
	return strings.Join(parts, "|")
}

// KeyColumns returns the indexes of the columns of img that find its row
// downstream: those flagged FlagHandleKey, else those flagged
// FlagPrimaryKey; nil when there are none (a sink then matches the whole
// image).
func KeyColumns(img []Column) []int {
	for _, f := range []ColumnFlag{FlagHandleKey, FlagPrimaryKey} {
		var key []int
		for i := range img {
			if img[i].Flags.Has(f) {
				key = append(key, i)
			}
		}
		if key != nil {
			return key
		}
	}
	return nil
}

// KeyChanged reports whether an update moves its row to another key: the
// key columns (KeyColumns) of pre and post differ in number, name or value,
// or there are none, in which case every update is the delete of the old
// image and the insert of the new one.
func KeyChanged(pre, post []Column) bool {
	kp, kq := KeyColumns(pre), KeyColumns(post)
	if kp == nil || len(kp) != len(kq) {
		return true
	}
	for i := range kp {
		a, b := &pre[kp[i]], &post[kq[i]]
		if a.Name != b.Name || !a.Value.Equal(b.Value) {
			return true
		}
	}
	return false
}

// Type is a MySQL column type code (the mysql.TypeXxx numbers of MySQL's
// protocol and of TiDB).
type Type uint8

// MySQL type codes.
const (
	TypeDecimal    Type = 0x00 // old DECIMAL; TiDB calls it TypeUnspecified
	TypeTiny       Type = 0x01 // TINYINT
	TypeShort      Type = 0x02 // SMALLINT
	TypeLong       Type = 0x03 // INT
	TypeFloat      Type = 0x04 // FLOAT
	TypeDouble     Type = 0x05 // DOUBLE
	TypeNull       Type = 0x06
	TypeTimestamp  Type = 0x07 // TIMESTAMP
	TypeLonglong   Type = 0x08 // BIGINT
	TypeInt24      Type = 0x09 // MEDIUMINT
	TypeDate       Type = 0x0a // DATE
	TypeDuration   Type = 0x0b // TIME
	TypeDatetime   Type = 0x0c // DATETIME
	TypeYear       Type = 0x0d // YEAR
	TypeNewDate    Type = 0x0e
	TypeVarchar    Type = 0x0f // VARCHAR, VARBINARY
	TypeBit        Type = 0x10 // BIT
	TypeJSON       Type = 0xf5 // JSON
	TypeNewDecimal Type = 0xf6 // DECIMAL
	TypeEnum       Type = 0xf7 // ENUM
	TypeSet        Type = 0xf8 // SET
	TypeTinyBlob   Type = 0xf9 // TINYBLOB, TINYTEXT
	TypeMediumBlob Type = 0xfa // MEDIUMBLOB, MEDIUMTEXT
	TypeLongBlob   Type = 0xfb // LONGBLOB, LONGTEXT
	TypeBlob       Type = 0xfc // BLOB, TEXT
	TypeVarString  Type = 0xfd
	TypeString     Type = 0xfe // CHAR, BINARY
	TypeGeometry   Type = 0xff
)

// DDL is one schema change.
type DDL struct {
	StartTs  uint64
	CommitTs uint64
	// Table is the table the statement names. For a schema-level DDL only
	// Schema is set; for one naming several tables, the first.
	Table TableName
	Type  ActionType
	Query string
	// Tables lists every physical table the DDL touches, each with its role.
	// It must include the tables the DDL creates and drops: the DDL barrier
	// holds the redo watermark at a DDL that creates tables until their spans
	// exist, and it can only know them from here.
	Tables []DDLTable
}

// DDLTable is a table a DDL touches.
type DDLTable struct {
	TableName
	Role TableRole
}

// TableRole says what a DDL does to one of its tables. The numbers are the
// wire codes. TRUNCATE TABLE, for instance, drops the old physical table and
// creates a new one: list both.
type TableRole uint8

// Table roles.
const (
	RoleAffected TableRole = 0 // the table exists before and after (ALTER, RENAME, CREATE INDEX)
	RoleCreated  TableRole = 1 // the DDL creates this physical table (CREATE, TRUNCATE's new ID, ADD PARTITION)
	RoleDropped  TableRole = 2 // the DDL drops this physical table (DROP, TRUNCATE's old ID, DROP PARTITION)
	maxRole                = RoleDropped
)

func (r TableRole) String() string {
	switch r {
	case RoleAffected:
		return "affected"
	case RoleCreated:
		return "created"
	case RoleDropped:
		return "dropped"
	}
	return "role(" + strconv.Itoa(int(r)) + ")"
}

// ActionType is the kind of a DDL: TiDB's model.ActionType numbers.
type ActionType uint8

// DDL action types. The numbers are TiDB's; only the ones a redo log cares
// about are named, any other byte passes through unchanged.
const (
	ActionNone                   ActionType = 0
	ActionCreateSchema           ActionType = 1
	ActionDropSchema             ActionType = 2
	ActionCreateTable            ActionType = 3
	ActionDropTable              ActionType = 4
	ActionAddColumn              ActionType = 5
	ActionDropColumn             ActionType = 6
	ActionAddIndex               ActionType = 7 // CREATE INDEX, ALTER TABLE … ADD INDEX
	ActionDropIndex              ActionType = 8
	ActionTruncateTable          ActionType = 11
	ActionModifyColumn           ActionType = 12
	ActionRenameTable            ActionType = 14
	ActionAddTablePartition      ActionType = 19
	ActionDropTablePartition     ActionType = 20
	ActionCreateView             ActionType = 21
	ActionTruncateTablePartition ActionType = 23
	ActionDropView               ActionType = 24
	ActionRecoverTable           ActionType = 25
	ActionAddPrimaryKey          ActionType = 32
	ActionDropPrimaryKey         ActionType = 33
	ActionExchangeTablePartition ActionType = 42
	ActionRenameTables           ActionType = 47
	ActionCreateTables           ActionType = 60
	ActionMultiSchemaChange      ActionType = 61
	ActionReorganizePartition    ActionType = 64
	ActionAlterTablePartitioning ActionType = 71
	ActionRemovePartitioning     ActionType = 72
)

var actionNames = map[ActionType]string{
	ActionNone: "none", ActionCreateSchema: "create schema", ActionDropSchema: "drop schema",
	ActionCreateTable: "create table", ActionDropTable: "drop table", ActionAddColumn: "add column",
	ActionDropColumn: "drop column", ActionAddIndex: "add index", ActionDropIndex: "drop index",
	ActionTruncateTable: "truncate table", ActionModifyColumn: "modify column",
	ActionRenameTable: "rename table", ActionAddTablePartition: "add partition",
	ActionDropTablePartition: "drop partition", ActionCreateView: "create view",
	ActionTruncateTablePartition: "truncate partition", ActionDropView: "drop view",
	ActionRecoverTable: "recover table", ActionAddPrimaryKey: "add primary key",
	ActionDropPrimaryKey: "drop primary key", ActionExchangeTablePartition: "exchange partition",
	ActionRenameTables: "rename tables", ActionCreateTables: "create tables",
	ActionMultiSchemaChange: "multi-schema change", ActionReorganizePartition: "reorganize partition",
	ActionAlterTablePartitioning: "alter table partition by", ActionRemovePartitioning: "remove partitioning",
}

func (a ActionType) String() string {
	if s, ok := actionNames[a]; ok {
		return s
	}
	return "action(" + strconv.Itoa(int(a)) + ")"
}
