package apply

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// SinkOptions configure a sink opened by [Open]. nil and zero fields take the
// defaults; a sink ignores the fields that do not apply to it.
type SinkOptions struct {
	// ProgressTable is the name of the table the sink records its progress
	// in. "" means DefaultProgressTable. Two logs applied into one
	// downstream need two.
	ProgressTable string
	// ProgressSchema is the MySQL database that holds the progress table:
	// by default the database of the URI, or "redokit" when it names none
	// (created if missing). SQLite ignores it.
	ProgressSchema string
	// MaxStatementRows caps the rows of one multi-row statement. 0 means
	// DefaultMaxStatementRows.
	MaxStatementRows int
	// StrictDDL makes a DDL whose effect is already there (a table that
	// exists, a column already added, a table already dropped) an error.
	// By default it is logged and counted as applied: see the package doc.
	StrictDDL bool
	// Logger receives tolerated DDL errors. nil discards.
	Logger *slog.Logger
	// LogID is the ID of the log being applied (meta.Meta.ID): the progress
	// rows are kept per log, so that two logs applied into one downstream
	// keep apart. "" is a log without an ID (events held in memory).
	LogID string
	// SinkName tells apart several applies of one log into one downstream
	// (for instance each with its own table filter): their progress is kept
	// apart too. "" is the default name.
	SinkName string
	// AnotherLog allows applying a log into a downstream that already holds
	// another log's progress. Without it that is an error: a downstream
	// normally mirrors one upstream, and a second log there is more often a
	// wrong URL than a plan.
	AnotherLog bool
	// ForeignKeyChecks keeps the downstream's foreign-key checks on during
	// the apply. By default they are off for the apply's sessions (MySQL's
	// foreign_key_checks=0, PostgreSQL's session_replication_role=replica;
	// SQLite's are off unless a connection enables them), as replication
	// tools do: the log holds every change the upstream's own cascades
	// made, so a cascade or a check downstream can only delete or refuse
	// what the log says is there.
	ForeignKeyChecks bool
	// DryRun, when not nil, makes the sink a dry run: the sink writes the
	// statements it would run, with their values, to DryRun and runs none;
	// the progress table is not written.
	DryRun io.Writer
}

// Defaults for zero SinkOptions fields.
const (
	DefaultProgressTable    = "redokit_apply_progress"
	DefaultMaxStatementRows = 1024
)

// OpenFunc opens the sink a URI names; see [Register].
type OpenFunc func(ctx context.Context, uri string, opts *SinkOptions) (Sink, error)

var (
	openersMu sync.RWMutex
	openers   = map[string]OpenFunc{}
)

// Register makes the sinks of a URI scheme available to [Open]. A sink
// package calls it from init, as a database/sql driver registers itself, so
// that a program links the drivers of the sinks it imports and no others:
//
//	import _ "github.com/redokit/redokit/apply/sqlite" // sqlite:, sqlite3:
//	import _ "github.com/redokit/redokit/apply/mysql"  // mysql:, mariadb:, tidb:
//
// Schemes are case-insensitive. Register panics if open is nil or the scheme
// is registered twice.
func Register(scheme string, open OpenFunc) {
	scheme = strings.ToLower(scheme)
	openersMu.Lock()
	defer openersMu.Unlock()
	if open == nil || scheme == "" {
		panic("apply: Register of a nil OpenFunc or an empty scheme")
	}
	if _, dup := openers[scheme]; dup {
		panic("apply: Register called twice for scheme " + scheme)
	}
	openers[scheme] = open
}

// Schemes returns the registered URI schemes, sorted.
func Schemes() []string {
	openersMu.RLock()
	defer openersMu.RUnlock()
	s := make([]string, 0, len(openers))
	for k := range openers {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

// Open opens the sink a URI names, with the OpenFunc registered for its
// scheme (the part before the first ':'). A scheme nobody registered fails
// with ErrBadURI, naming the schemes that are. Errors never show the URI's
// password.
func Open(ctx context.Context, uri string, opts *SinkOptions) (Sink, error) {
	scheme, _, ok := strings.Cut(uri, ":")
	if !ok || scheme == "" {
		return nil, BadURI(uri, "no scheme: want one of %s", strings.Join(Schemes(), ", "))
	}
	openersMu.RLock()
	open := openers[strings.ToLower(scheme)]
	openersMu.RUnlock()
	if open == nil {
		return nil, BadURI(uri, "unknown scheme %q: want one of %s (a sink package registers its schemes when imported)",
			scheme, strings.Join(Schemes(), ", "))
	}
	s, err := open(ctx, uri, opts)
	if err != nil {
		// A sink package's Open returns its own pointer type: a failure
		// would reach the caller as a typed nil, a Sink that is not nil.
		return nil, err
	}
	return s, nil
}

// ErrBadURI is wrapped by the error of a sink URI that does not parse. The
// message shows the URI with its password replaced by "xxxxx".
var ErrBadURI = errors.New("bad sink URI")

// BadURI returns an error wrapping ErrBadURI that shows uri [Redact]ed and
// why it is refused: for sink packages, so that every sink words it alike.
func BadURI(uri, format string, args ...any) error {
	return fmt.Errorf("apply: %w %q: %s", ErrBadURI, Redact(uri), fmt.Sprintf(format, args...))
}

// Redact returns uri with the password of its user info (if any) replaced by
// "xxxxx". It works on URIs that do not parse too, so that an error about a
// malformed URI can show it.
func Redact(uri string) string {
	if u, err := url.Parse(uri); err == nil {
		if _, has := u.User.Password(); has {
			return u.Redacted()
		}
		if u.User != nil || !strings.Contains(uri, "@") {
			return uri
		}
	}
	// By hand: scheme://user:password@rest. The user info ends at the last
	// '@' before the path (a password may hold '@' or '/').
	i := strings.Index(uri, "://")
	if i < 0 {
		return uri
	}
	auth := uri[i+3:]
	at := strings.LastIndex(auth, "@")
	if at < 0 {
		return uri
	}
	colon := strings.Index(auth[:at], ":")
	if colon < 0 {
		return uri
	}
	return uri[:i+3] + auth[:colon+1] + "xxxxx" + auth[at:]
}
