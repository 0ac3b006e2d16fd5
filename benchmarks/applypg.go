package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/mysql"
	"github.com/redokit/redokit/apply/postgres"
)

// pgDurable are the PostgreSQL settings a commit's durability rests on:
// the cell wants each "on" while it measures.
var pgDurable = []string{"fsync", "synchronous_commit"}

// newPostgresEnv makes sinks on the server of REDOKIT_POSTGRES_DSN: the
// workload in a fresh schema of the DSN's database (the gen schema) and the
// progress in another, both dropped after. It turns fsync and
// synchronous_commit on (ALTER SYSTEM, reloaded) when either is off, records
// the values measured with, and restores the old ones at close (unless
// durable is false: the tests leave the server as it is). A nil env with a
// nil error means the server is not available (res.Info says why).
func newPostgresEnv(ctx context.Context, in childInput, res *Result, durable bool) (*applyEnv, error) {
	dsn := os.Getenv("REDOKIT_POSTGRES_DSN")
	if dsn == "" {
		res.Info[applyUnavailable] = "REDOKIT_POSTGRES_DSN is not set (scripts/emulators.sh start postgres, then source its env file)"
		return nil, nil
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		// pgx's parse errors do not quote the password.
		return nil, fmt.Errorf("REDOKIT_POSTGRES_DSN: %w", err)
	}
	admin := stdlib.OpenDB(*cfg)
	admin.SetMaxOpenConns(1) // ALTER SYSTEM and its reload on one session
	addr := fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
	if err := admin.PingContext(ctx); err != nil {
		admin.Close()
		res.Info[applyUnavailable] = fmt.Sprintf("PostgreSQL at %s does not answer: %v", addr, err)
		return nil, nil
	}
	read := func() (map[string]string, error) {
		vals := map[string]string{}
		for _, name := range append([]string{"server_version", "wal_sync_method", "full_page_writes"}, pgDurable...) {
			var v string
			if err := admin.QueryRowContext(ctx, "SELECT current_setting($1)", name).Scan(&v); err != nil {
				return nil, fmt.Errorf("PostgreSQL at %s: read %s: %w", addr, name, err)
			}
			vals[name] = v
		}
		return vals, nil
	}
	before, err := read()
	if err != nil {
		admin.Close()
		return nil, err
	}
	var changed []string
	reload := func(ctx context.Context) error {
		_, err := admin.ExecContext(ctx, "SELECT pg_reload_conf()")
		if err == nil {
			// The reload reaches the sessions at their next command; the
			// admin's own session is the one read below.
			time.Sleep(200 * time.Millisecond)
		}
		return err
	}
	restore := func() {
		if len(changed) == 0 {
			return
		}
		rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, name := range changed {
			if _, err := admin.ExecContext(rctx, fmt.Sprintf("ALTER SYSTEM SET %s = '%s'", name, before[name])); err != nil {
				fmt.Fprintf(os.Stderr, "apply/postgres: restore %s=%s: %v\n", name, before[name], err)
			}
		}
		if err := reload(rctx); err != nil {
			fmt.Fprintf(os.Stderr, "apply/postgres: reload the configuration: %v\n", err)
		}
	}
	if durable {
		for _, name := range pgDurable {
			if before[name] != "on" {
				if _, err := admin.ExecContext(ctx, "ALTER SYSTEM SET "+name+" = on"); err != nil {
					restore()
					admin.Close()
					return nil, fmt.Errorf("PostgreSQL at %s: ALTER SYSTEM SET %s = on: %w", addr, name, err)
				}
				changed = append(changed, name)
			}
		}
		if len(changed) > 0 {
			if err := reload(ctx); err != nil {
				restore()
				admin.Close()
				return nil, fmt.Errorf("PostgreSQL at %s: reload the configuration: %w", addr, err)
			}
		}
	}
	meas, err := read()
	if err != nil {
		restore()
		admin.Close()
		return nil, err
	}
	if durable {
		for _, name := range pgDurable {
			if meas[name] != "on" {
				restore()
				admin.Close()
				return nil, fmt.Errorf("PostgreSQL at %s: %s is %s after setting it on", addr, name, meas[name])
			}
		}
	}
	res.Info["server"] = "PostgreSQL " + meas["server_version"]
	for _, name := range append([]string{"wal_sync_method", "full_page_writes"}, pgDurable...) {
		res.Info[name] = meas[name]
		res.Info[name+"_before"] = before[name]
	}

	schema := fmt.Sprintf("rkbench_%d_%d", os.Getpid(), in.Rep)
	progress := schema + "_progress"
	drop := func(ctx context.Context) error {
		for _, s := range []string{schema, progress} {
			if _, err := admin.ExecContext(ctx, `DROP SCHEMA IF EXISTS "`+s+`" CASCADE`); err != nil {
				return fmt.Errorf("PostgreSQL: drop schema %s: %w", s, err)
			}
		}
		return nil
	}
	if err := drop(ctx); err != nil {
		restore()
		admin.Close()
		return nil, err
	}
	// The sinks open the DSN as `redokit apply --sink` would; the DSN is
	// a URI (pgx takes key=value strings too, postgres.Open does not).
	if u, err := url.Parse(dsn); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		restore()
		admin.Close()
		return nil, fmt.Errorf("REDOKIT_POSTGRES_DSN: want a postgres:// URI")
	}
	return &applyEnv{
		admin:   admin,
		schema:  schema,
		dialect: applyPostgres,
		open: func(ctx context.Context, name, logID string) (*mysql.Sink, error) {
			return postgres.Open(ctx, dsn, &apply.SinkOptions{LogID: logID, ProgressSchema: progress})
		},
		reset: drop,
		settle: func(ctx context.Context) error {
			_, err := admin.ExecContext(ctx, "CHECKPOINT")
			return err
		},
		close: func() {
			dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := drop(dctx); err != nil {
				fmt.Fprintln(os.Stderr, "apply/postgres:", err)
			}
			restore()
			admin.Close()
		},
		ref: func(t string) string { return `"` + schema + `"."` + t + `"` },
	}, nil
}
