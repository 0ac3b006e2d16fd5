package main

import (
	"context"
	"fmt"
	"net/url"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ddlTable is the table the event triggers write each DDL into, in the
// publication like every other table: pgoutput carries no DDL, so the DDL
// travels as a row, in the WAL order of the transaction that ran it.
const ddlTable = "pgcdc_ddl"

// setupSQL makes the DDL table and its event triggers. ddl_command_end
// records each DDL statement (its tag, its text as the client sent it, and
// for a table its OID, schema, name and primary-key columns), and sets
// REPLICA IDENTITY FULL on each table it creates, so that every update and
// delete carries the whole old row; sql_drop runs first for a DROP and
// leaves the dropped table's identity for it in a transaction-local setting.
const setupSQL = `
CREATE TABLE IF NOT EXISTS public.pgcdc_ddl (
	id bigserial PRIMARY KEY,
	tag text NOT NULL,
	query text NOT NULL,
	objid bigint,
	schema_name text,
	table_name text,
	pk text
);
ALTER TABLE public.pgcdc_ddl ADD COLUMN IF NOT EXISTS seq int;
CREATE OR REPLACE FUNCTION public.pgcdc_on_drop() RETURNS event_trigger LANGUAGE plpgsql AS $f$
DECLARE r record;
BEGIN
	FOR r IN SELECT * FROM pg_event_trigger_dropped_objects() WHERE object_type = 'table' AND original LOOP
		PERFORM set_config('pgcdc.dropped', r.objid::text || '/' || r.schema_name || '/' || r.object_name, true);
	END LOOP;
END $f$;
CREATE OR REPLACE FUNCTION public.pgcdc_on_ddl() RETURNS event_trigger LANGUAGE plpgsql AS $f$
DECLARE
	r record;
	oid_ bigint; schema_ text; name_ text; pk_ text; d text[];
	msg text; seqs jsonb; seq_ int;
BEGIN
	IF current_setting('pgcdc.inner', true) = 'on' THEN RETURN; END IF;
	-- current_query() is the client's whole message, every statement of
	-- it: count the statements of each tag in the message (one receipt
	-- time, one text), so the capture can pick this one out.
	msg := statement_timestamp()::text || md5(current_query());
	seqs := CASE WHEN current_setting('pgcdc.msg', true) IS NOT DISTINCT FROM msg
		THEN coalesce(nullif(current_setting('pgcdc.seqs', true), ''), '{}')::jsonb ELSE '{}' END;
	seq_ := coalesce((seqs ->> TG_TAG)::int, 0) + 1;
	PERFORM set_config('pgcdc.msg', msg, false);
	PERFORM set_config('pgcdc.seqs', jsonb_set(seqs, ARRAY[TG_TAG], to_jsonb(seq_))::text, false);
	FOR r IN SELECT * FROM pg_event_trigger_ddl_commands() WHERE object_type = 'table' LOOP
		oid_ := r.objid; schema_ := r.schema_name;
		SELECT relname INTO name_ FROM pg_class WHERE oid = r.objid;
		SELECT string_agg(a.attname, ',' ORDER BY k.n) INTO pk_
			FROM pg_index i CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, n)
			JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
			WHERE i.indrelid = r.objid AND i.indisprimary;
		IF r.command_tag = 'CREATE TABLE' THEN
			PERFORM set_config('pgcdc.inner', 'on', true);
			EXECUTE format('ALTER TABLE %s REPLICA IDENTITY FULL', r.objid::regclass);
			PERFORM set_config('pgcdc.inner', 'off', true);
		END IF;
		EXIT;
	END LOOP;
	IF TG_TAG = 'DROP TABLE' AND coalesce(current_setting('pgcdc.dropped', true), '') <> '' THEN
		d := string_to_array(current_setting('pgcdc.dropped', true), '/');
		oid_ := d[1]::bigint; schema_ := d[2]; name_ := d[3];
		PERFORM set_config('pgcdc.dropped', '', true);
	END IF;
	IF name_ = 'pgcdc_ddl' THEN RETURN; END IF;
	INSERT INTO public.pgcdc_ddl (tag, query, objid, schema_name, table_name, pk, seq)
		VALUES (TG_TAG, current_query(), oid_, schema_, name_, pk_, seq_);
END $f$;
`

// upstream is what setup leaves the coordinator.
type upstream struct {
	// start is the log's start ts for a new log (see snapshotStart); 0
	// when every slot existed: the log is the one they fed.
	start uint64
	// snap is the initial snapshot to log, with start; nil with start 0.
	snap *snapshot
}

// close releases the snapshot, if the coordinator did not take it.
func (u *upstream) close() {
	if u != nil && u.snap != nil {
		u.snap.close()
	}
}

// setup prepares the upstream for the capture, idempotently: the DDL table
// and triggers, REPLICA IDENTITY FULL on the tables already there, the
// publication (FOR ALL TABLES, so tables created later are carried too) and
// one replication slot per writer. When it created a slot it exports an
// initial snapshot after them all (see exportSnapshot): the log starts
// there, the snapshot holds what committed before it and the slots what
// commits after.
func setup(ctx context.Context, dsn, publication string, slots []string) (*upstream, error) {
	conn, err := connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_event_trigger WHERE evtname = 'pgcdc_ddl_end'").Scan(&n); err != nil {
		return nil, err
	}
	if n > 0 {
		// Set up before: bring the DDL table and functions up to date,
		// with the trigger told to record none of it (the capture stops
		// on DDL it does not translate).
		if _, err := conn.Exec(ctx, "SELECT set_config('pgcdc.inner', 'on', false)"); err != nil {
			return nil, err
		}
		if _, err := conn.Exec(ctx, setupSQL); err != nil {
			return nil, fmt.Errorf("upstream: update the DDL table and its functions: %w", err)
		}
	} else {
		if _, err := conn.Exec(ctx, setupSQL); err != nil {
			return nil, fmt.Errorf("upstream: create the DDL table and its functions: %w", err)
		}
		// Tables already there: every update and delete must carry the old row.
		rows, err := conn.Query(ctx, `SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind = 'r' AND c.relreplident <> 'f' AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'`)
		if err != nil {
			return nil, err
		}
		tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, err
		}
		for _, t := range tables {
			if _, err := conn.Exec(ctx, "ALTER TABLE "+t+" REPLICA IDENTITY FULL"); err != nil {
				return nil, fmt.Errorf("upstream: table %s: set REPLICA IDENTITY FULL: %w", t, err)
			}
		}
		// The triggers before the slots: a DDL that commits before the
		// snapshot's LSN is in the snapshot (its record is skipped), one
		// after it is recorded.
		for _, q := range []string{
			"CREATE EVENT TRIGGER pgcdc_ddl_end ON ddl_command_end EXECUTE FUNCTION public.pgcdc_on_ddl()",
			"CREATE EVENT TRIGGER pgcdc_ddl_drop ON sql_drop EXECUTE FUNCTION public.pgcdc_on_drop()",
		} {
			if _, err := conn.Exec(ctx, q); err != nil {
				return nil, fmt.Errorf("upstream: %s: %w", q, err)
			}
		}
	}
	created, err := ensureSlots(ctx, conn, dsn, publication, slots)
	if err != nil || !created {
		return &upstream{}, err
	}
	snap, err := exportSnapshot(ctx, dsn, slots[len(slots)-1]+"_snapshot")
	if err != nil {
		return nil, err
	}
	return &upstream{start: snapshotStart(snap.lsn), snap: snap}, nil
}

// ensureSlots creates the publication and the slots that are missing, and
// reports whether it created one.
func ensureSlots(ctx context.Context, conn *pgx.Conn, dsn, publication string, slots []string) (bool, error) {
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_publication WHERE pubname = $1", publication).Scan(&n); err != nil {
		return false, err
	}
	if n == 0 {
		if _, err := conn.Exec(ctx, "CREATE PUBLICATION "+pgx.Identifier{publication}.Sanitize()+" FOR ALL TABLES"); err != nil {
			return false, fmt.Errorf("upstream: create publication %s: %w", publication, err)
		}
	}
	created := false
	for _, slot := range slots {
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&n); err != nil {
			return false, err
		}
		if n > 0 {
			continue
		}
		rc, err := replConnect(ctx, dsn)
		if err != nil {
			return false, err
		}
		_, err = pglogrepl.CreateReplicationSlot(ctx, rc, slot, "pgoutput", pglogrepl.CreateReplicationSlotOptions{Mode: pglogrepl.LogicalReplication})
		rc.Close(context.Background())
		if err != nil {
			return false, fmt.Errorf("upstream: create replication slot %s: %w", slot, err)
		}
		created = true
	}
	return created, nil
}

// sessionParams fix the session settings that decide the text of the values
// pgoutput sends: times in UTC, floats in their shortest exact form, bytea in
// hex, ISO dates.
var sessionParams = map[string]string{
	"timezone":           "UTC",
	"extra_float_digits": "1",
	"bytea_output":       "hex",
	"datestyle":          "ISO, MDY",
}

func connect(ctx context.Context, dsn string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("upstream DSN: %w", err)
	}
	for k, v := range sessionParams {
		cfg.RuntimeParams[k] = v
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("upstream %s: %w", cfg.Host, err)
	}
	return c, nil
}

func replConnect(ctx context.Context, dsn string) (*pgconn.PgConn, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("upstream DSN: %w", err)
	}
	cfg.RuntimeParams["replication"] = "database"
	for k, v := range sessionParams {
		cfg.RuntimeParams[k] = v
	}
	c, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("upstream %s (replication connection): %w", cfg.Host, err)
	}
	return c, nil
}

// redactDSN shows a DSN without its password.
func redactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return "(upstream DSN)"
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}
