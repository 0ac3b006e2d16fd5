package sqlsink_test

import (
	"context"
	"net"
	"net/url"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/internal/sqlsink"
	"github.com/redokit/redokit/codec"
)

// TestCommitOutlivesCancel ends the apply's context while a COMMIT's answer
// is on its way: a proxy between the sink and PostgreSQL holds the server's
// bytes for 600 ms, so the server has committed and the answer lags. Commit
// must report what the server did. Before the commit guard, pgx cut the
// COMMIT at the cancel (it dropped the connection and sent a cancel request,
// too late for a transaction already committed) and Commit failed although
// the transaction had committed: an apply took it as not applied, and the
// next Run, reading the progress before that commit was visible, replayed it
// and doubled a keyless table's rows (TestResume under CI's load).
func TestCommitOutlivesCancel(t *testing.T) {
	e := newEnv(t, sqlsink.Postgres)
	tbl := e.table("t")
	e.exec("CREATE TABLE " + tbl + " (a BIGINT, v TEXT)")

	p := startLagProxy(t, e.uri)
	direct := e.uri
	e.uri = p.uri
	s := e.open(nil)
	e.uri = direct

	table := apply.Table{Schema: e.schema, Name: "t"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tx, err := s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ev := rowEv(10, e.schema, "t", nil, []codec.Column{icol("a", 1, codec.FlagNullable), scol("v", "x")})
	if err := tx.ApplyRows(ctx, table, []*codec.RowChange{&ev.Row}); err != nil {
		t.Fatal(err)
	}
	// From the COMMIT on, the server's answers lag, and the context ends
	// while the COMMIT's is held.
	p.armCommit(func() {
		p.lag.Store(int64(600 * time.Millisecond))
		time.AfterFunc(200*time.Millisecond, cancel)
	})
	start := time.Now()
	err = tx.Commit(ctx, []apply.Mark{{Table: table, CommitTs: 10}})
	t.Logf("Commit after %v: %v", time.Since(start).Round(time.Millisecond), err)
	if !p.sawCommit.Load() || ctx.Err() == nil {
		t.Fatalf("the COMMIT (seen: %v) did not meet the context's end (%v)", p.sawCommit.Load(), ctx.Err())
	}

	var n int
	if err := e.admin.QueryRow("SELECT count(*) FROM " + tbl).Scan(&n); err != nil {
		t.Fatal(err)
	}
	switch {
	case err == nil && n != 1:
		t.Fatalf("Commit succeeded, but the table holds %d rows", n)
	case err != nil && n != 0:
		t.Fatalf("Commit failed (%v), but the transaction committed: the table holds %d rows", err, n)
	case err != nil:
		t.Fatalf("Commit failed (%v): a COMMIT sent must finish", err)
	}
}

// lagProxy forwards TCP connections to a PostgreSQL server and, while lag
// is set, holds each chunk the server sends that long before passing it on:
// the answers of a congested link. Armed, it calls a function at the next
// COMMIT a client sends (a query whose text is "commit", as pgx sends it).
type lagProxy struct {
	uri       string // the DSN, through the proxy
	lag       atomic.Int64
	onCommit  atomic.Pointer[func()]
	sawCommit atomic.Bool // the armed COMMIT came
}

// armCommit has the proxy call f when the next COMMIT passes it.
func (p *lagProxy) armCommit(f func()) { p.onCommit.Store(&f) }

// commitQuery is the end of a Query or Parse message of a COMMIT: the
// query text, NUL-terminated (no other query of the sink's ends so).
var commitQuery = regexp.MustCompile(`(?i)\bcommit\x00`)

func startLagProxy(t *testing.T, dsn string) *lagProxy {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		t.Fatalf("the PostgreSQL DSN is not a URL with a host: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	upstream := u.Host
	u.Host = ln.Addr().String()
	p := &lagProxy{uri: u.String()}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			srv, err := net.Dial("tcp", upstream)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, srv)
			mu.Unlock()
			wg.Add(2)
			go pipe(&wg, srv, c, func(b []byte) {
				if p.onCommit.Load() == nil || !commitQuery.Match(b) {
					return
				}
				if f := p.onCommit.Swap(nil); f != nil {
					p.sawCommit.Store(true)
					(*f)()
				}
			})
			go pipe(&wg, c, srv, func([]byte) {
				if d := p.lag.Load(); d > 0 {
					time.Sleep(time.Duration(d))
				}
			})
		}
	}()
	return p
}

// pipe copies src to dst, calling each on every chunk before passing it on,
// until either side ends; then it closes dst.
func pipe(wg *sync.WaitGroup, dst, src net.Conn, each func([]byte)) {
	defer wg.Done()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			each(buf[:n])
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
