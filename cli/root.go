package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/redokit/redokit"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/gc"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// exitErr carries an exit code other than the default 1.
type exitErr struct {
	code int
	err  error
}

func (e *exitErr) Error() string { return e.err.Error() }
func (e *exitErr) Unwrap() error { return e.err }

// usageErrorf is a mistake in the command line itself: exit code 2.
func usageErrorf(format string, args ...any) error {
	return &exitErr{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// errSilent is returned by commands that already printed why they failed
// (verify's report, check's table): exit 1 with nothing more to say.
var errSilent = errors.New("failed")

// app holds what every command shares: the global flags, the streams, and
// the switches tests use to stand in for a terminal.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer

	storage    string
	logID      string
	jsonOut    bool
	noProgress bool
	verbose    bool

	// ran is set once a command's own code starts: an error before that is
	// cobra refusing the command line (unknown command or flag, a missing
	// required flag), which is a usage error.
	ran bool
	// interactive overrides the terminal check of stdin (tests answer
	// prompts through it); nil means "look at stdin".
	interactive *bool
	// printedJSON is set once a command printed its JSON document, so that
	// an error after it does not print a second one.
	printedJSON bool
	// progressTTY overrides the terminal check for progress bars (tests).
	progressTTY *bool
}

// Command annotations: which global flags a command needs.
const (
	annStorage = "needs-storage" // --storage is required
	annLog     = "needs-log"     // --log is required
)

func newApp(stdin io.Reader, stdout, stderr io.Writer) *app {
	return &app{stdin: stdin, stdout: stdout, stderr: stderr}
}

func (a *app) execute(ctx context.Context, args []string) int {
	root := a.rootCmd()
	root.SetArgs(args)
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	code := exitError
	if !a.ran {
		code = exitUsage
	}
	var ee *exitErr
	if errors.As(err, &ee) {
		code = ee.code
	}
	if ctx.Err() != nil && code != exitUsage {
		// Interrupted: each sink and store words a canceled call its own
		// way ("context canceled", "interrupted", "invalid connection"),
		// none of which says what happened. One message does.
		path := "redokit"
		if cmd != nil {
			path = cmd.CommandPath()
		}
		cause := err
		err = fmt.Errorf("interrupted: %s stopped before it finished", path)
		if a.verbose && !errors.Is(cause, errSilent) {
			err = fmt.Errorf("%w (%v)", err, cause)
		}
	}
	if gc.NoSpace(err) {
		err = &noSpaceError{err}
	}
	if !errors.Is(err, errSilent) {
		fmt.Fprintf(a.stderr, "redokit: %s\n", onePrefix(err.Error()))
		// A script that asked for JSON reads stdout as JSON whatever
		// happened, once: a command that printed its own (verify's report,
		// apply's summary with where it stopped) said it already.
		if !a.printedJSON && (a.jsonOut || jsonAsked(args)) {
			_ = a.printJSON(struct {
				Error    string `json:"error"`
				ExitCode int    `json:"exit_code"`
			}{err.Error(), code})
		}
	}
	if code == exitUsage {
		path := "redokit"
		if cmd != nil {
			path = cmd.CommandPath()
		}
		fmt.Fprintf(a.stderr, "Run '%s --help' for usage.\n", path)
	}
	return code
}

// jsonAsked reports whether the command line asks for --json, for errors
// raised before (or while) cobra parsed the flags, when a.jsonOut may not be
// set yet.
func jsonAsked(args []string) bool {
	for _, arg := range args {
		switch arg {
		case "--":
			return false
		case "--json", "--json=true", "--json=1":
			return true
		}
	}
	return false
}

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "redokit",
		Short: "Inspect, verify, replay and maintain redo logs of change data capture",
		Long: `redokit works on redo logs of change data capture: the durable, ordered record
of row changes and DDLs a CDC system writes before its downstream sink, replayed
into the downstream after a disaster.

Every command takes --storage URI (file:///dir or a plain path, s3://bucket/prefix,
gs://bucket, azblob://container, mem://, gocloud+SCHEME://...) and --log ID
(REDOKIT_STORAGE and REDOKIT_LOG set their defaults), and --json for
machine-readable output, where every commit ts is a string of digits
("resolved_ts": "463000000000000777"): a TSO is above 2^53, which a JSON
number read as a double (jq, JavaScript) rounds. 'jq -r .resolved_ts' prints
it as every ts argument takes it.

'redokit apply' replays a log into MySQL-compatible databases, PostgreSQL or
SQLite; 'redokit bench' measures a storage, 'redokit check' whether it is fit
to hold a log.

Start with 'redokit demo': it writes a log with several writers, fails one
over, collects garbage, replays the log into SQLite and verifies the result.

Exit codes: 0 success, 1 failure, 2 bad usage.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		// Without this, cobra runs "completion" too; keep the surface small.
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
		PersistentPreRunE: a.preRun,
		Version:           versionString(),
	}
	root.SetVersionTemplate("redokit {{.Version}}\n")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &exitErr{code: exitUsage, err: err}
	})
	pf := root.PersistentFlags()
	pf.StringVar(&a.storage, "storage", "", "storage URI of the log's bucket, or a local directory (env REDOKIT_STORAGE)")
	pf.StringVar(&a.logID, "log", "", "log (changefeed) ID (env REDOKIT_LOG)")
	pf.BoolVar(&a.jsonOut, "json", false, "machine-readable JSON output (commit ts as strings of digits)")
	pf.BoolVar(&a.noProgress, "no-progress", false, "never show progress bars (they only show on a terminal anyway)")
	pf.BoolVarP(&a.verbose, "verbose", "v", false, "log what the library does, to stderr")

	root.AddCommand(
		a.demoCmd(),
		a.genCmd(),
		a.metaCmd(),
		a.lsCmd(),
		a.dumpCmd(),
		a.verifyCmd(),
		a.applyCmd(),
		a.checkpointCmd(),
		a.gcCmd(),
		a.rmCmd(),
		a.writerCmd(),
		a.checkCmd(),
		a.benchCmd(),
		a.tortureCmd(), a.tortureChildCmd(),
	)
	return root
}

// preRun checks the global flags a command needs before it runs. Errors here
// are usage errors: nothing has been touched yet.
func (a *app) preRun(cmd *cobra.Command, _ []string) error {
	a.ran = true
	if !cmd.Flags().Changed("storage") && a.storage == "" {
		a.storage = os.Getenv("REDOKIT_STORAGE")
	}
	if !cmd.Flags().Changed("log") && a.logID == "" {
		a.logID = os.Getenv("REDOKIT_LOG")
	}
	if cmd.Annotations[annStorage] != "" && a.storage == "" {
		return usageErrorf("%s needs --storage URI (for example file:///var/redo or s3://bucket/prefix)", cmd.Name())
	}
	if a.storage != "" {
		u, err := storageURL(a.storage)
		if err != nil {
			return err
		}
		a.storage = u
	}
	if cmd.Annotations[annLog] != "" {
		if a.logID == "" {
			return usageErrorf("%s needs --log ID", cmd.Name())
		}
	}
	if a.logID != "" {
		if err := checkID(a.logID); err != nil {
			return usageErrorf("--log %q: %v", a.logID, err)
		}
	}
	return nil
}

// storageURL turns the --storage value into a URL of a registered scheme: a
// value without "://" is a local directory. An unknown scheme is a usage
// error that lists the known ones.
func storageURL(s string) (string, error) {
	if !strings.Contains(s, "://") {
		abs, err := filepath.Abs(s)
		if err != nil {
			return "", usageErrorf("--storage %q: %v", s, err)
		}
		return (&url.URL{Scheme: "file", Path: abs}).String(), nil
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		return "", usageErrorf("--storage %s: not a URL", blob.RedactURL(s))
	}
	if !slices.Contains(blob.Schemes(), u.Scheme) {
		return "", usageErrorf("--storage %s: unknown scheme %q (known: %s)", blob.RedactURL(s), u.Scheme, strings.Join(blob.Schemes(), ", "))
	}
	return s, nil
}

// withCreateDir asks the local backend to create a missing root, for the
// commands that write a new log.
func withCreateDir(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "file" || u.Query().Has("create_dir") {
		return s
	}
	q := u.Query()
	q.Set("create_dir", "true")
	u.RawQuery = q.Encode()
	return u.String()
}

// open opens the --storage bucket.
func (a *app) open(ctx context.Context) (*blob.Bucket, error) {
	return openStorage(ctx, a.storage)
}

// openStorage opens a bucket by URL. A URL its backend refuses as such (an
// unknown query parameter, a malformed value) is a mistake in the command
// line, exit 2, like an unknown scheme; anything else (a missing directory,
// a store that does not answer) is a failure.
func openStorage(ctx context.Context, u string) (*blob.Bucket, error) {
	b, err := blob.Open(ctx, u)
	if errors.Is(err, blob.ErrInvalidArgument) {
		return nil, &exitErr{code: exitUsage, err: fmt.Errorf("--storage: %w", err)}
	}
	if err != nil {
		return nil, err // blob.Open names the URL, redacted
	}
	return b, nil
}

// log is the handle of the --log log in b. It does no I/O.
func (a *app) log(b *blob.Bucket) *redokit.Log {
	l, err := redokit.Open(context.Background(), b, a.logID)
	if err != nil {
		// --log is validated when the flags are parsed.
		panic(fmt.Sprintf("redokit: log %q passed the flag check: %v", a.logID, err))
	}
	return l
}

// logger is where the library's log records go: warnings (a torn tail the
// reader dropped, a retried write) always, everything with --verbose.
func (a *app) logger() *slog.Logger {
	level := slog.LevelWarn
	if a.verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: level}))
}

// storageShown is the storage URL as it may be printed.
func (a *app) storageShown() string {
	s := a.storage
	if strings.ContainsAny(s, "@?") {
		// Only then: url.Redacted would also turn "mem://" into "mem:".
		s = blob.RedactURL(s)
	}
	return unescapedURL(s)
}

// unescapedURL is a URL as a person reads it: its path unescaped
// ("file:///tmp/my dir", not "file:///tmp/my%20dir", which is how a local
// directory's URL is written), its query left as it is. --storage takes
// it back as it is shown.
func unescapedURL(s string) string {
	head, query, hasQuery := strings.Cut(s, "?")
	p, err := url.PathUnescape(head)
	if err != nil || strings.ContainsAny(p, "?#") || strings.ContainsFunc(p, unicode.IsControl) || strings.Contains(strings.ToUpper(head), "%2F") {
		return s // unescaped, it would read as another URL
	}
	if hasQuery {
		return p + "?" + query
	}
	return p
}

func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// canPrompt reports whether a question can be put to a person on stdin.
func (a *app) canPrompt() bool {
	if a.interactive != nil {
		return *a.interactive
	}
	return isTerminal(a.stdin) && isTerminal(a.stderr)
}

// confirm asks a yes/no question on stderr; anything but y or yes is no.
func (a *app) confirm(question string) bool {
	fmt.Fprintf(a.stderr, "%s [y/N] ", question)
	line, _ := bufio.NewReader(a.stdin).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}

// answer reads one line from stdin after printing prompt on stderr.
func (a *app) answer(prompt string) string {
	fmt.Fprint(a.stderr, prompt)
	line, _ := bufio.NewReader(a.stdin).ReadString('\n')
	return strings.TrimSpace(line)
}

// bar returns a progress bar on stderr, invisible unless stderr is a
// terminal (so pipes, files and CI logs never get one). max < 0 is a spinner.
func (a *app) bar(max int64, desc string, bytes bool) *progressbar.ProgressBar {
	if bytes {
		return a.newBar(max, desc, progressbar.OptionShowBytes(true), progressbar.OptionShowCount())
	}
	return a.newBar(max, desc, progressbar.OptionShowCount())
}

// progressVisible reports whether progress bars show.
func (a *app) progressVisible() bool {
	visible := isTerminal(a.stderr)
	if a.progressTTY != nil {
		visible = *a.progressTTY
	}
	return visible && !a.noProgress
}

func (a *app) newBar(max int64, desc string, extra ...progressbar.Option) *progressbar.ProgressBar {
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(a.stderr),
		progressbar.OptionSetVisibility(a.progressVisible()),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionThrottle(100 * time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionShowElapsedTimeOnFinish(),
		progressbar.OptionSetPredictTime(true), // [elapsed:left]
	}
	bar := progressbar.NewOptions64(max, append(opts, extra...)...)
	// The clock starts now, where the work does: left to the first Add it
	// starts after the first unit of work, and verify's first rate
	// sample read a whole segment over microseconds (1.3 TB/s).
	bar.StartWithoutRender()
	return bar
}

// rangeBarSteps is the resolution of a rangeBar: per mille of the range.
const rangeBarSteps = 1000

// rangeBar shows the progress of a read of the commit-ts range (start, end]
// as the share of the range passed, with the events read so far and the
// time left: the ts themselves are not quantities a person can read
// ("67953754572/123112783980"), and the events in the range are not known
// before they are read.
type rangeBar struct {
	bar        *progressbar.ProgressBar
	start, end uint64
	desc       string
}

func (a *app) rangeBar(start, end uint64, desc string) *rangeBar {
	return &rangeBar{bar: a.newBar(rangeBarSteps, desc), start: start, end: end, desc: desc}
}

// update records that the read reached commit ts ts after events events.
func (r *rangeBar) update(ts uint64, events int64) {
	r.bar.Describe(fmt.Sprintf("%s: %d events", r.desc, events))
	_ = r.bar.Set64(rangeSteps(r.start, r.end, ts))
}

func (r *rangeBar) finish() { _ = r.bar.Finish() }

// rangeSteps is how far ts is into (start, end], in rangeBarSteps.
func rangeSteps(start, end, ts uint64) int64 {
	if end <= start || ts <= start {
		return 0
	}
	if ts >= end {
		return rangeBarSteps
	}
	return int64(float64(ts-start) / float64(end-start) * rangeBarSteps)
}

// printJSON writes v as indented JSON on stdout.
func (a *app) printJSON(v any) error {
	a.printedJSON = true
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table returns a tab-aligned writer on stdout; Flush it.
func (a *app) table() *tabwriter.Writer {
	return tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
}

// tsTime renders a ts as a time when it looks like a TiDB TSO (physical
// milliseconds << 18 between 2000 and 2200); otherwise "".
func tsTime(ts uint64) string {
	ms := int64(ts >> 18)
	t := time.UnixMilli(ms).UTC()
	if ts == 0 || t.Year() < 2000 || t.Year() > 2200 {
		return ""
	}
	return t.Format("2006-01-02 15:04:05.000Z")
}

// tsDesc is a ts with its time, when it has one.
func tsDesc(ts uint64) string {
	if s := tsTime(ts); s != "" {
		return fmt.Sprintf("%d (%s)", ts, s)
	}
	return fmt.Sprint(ts)
}

// tsLag is how far apart two TSOs are in physical time, or "".
func tsLag(from, to uint64) string {
	if tsTime(from) == "" || tsTime(to) == "" || to < from {
		return ""
	}
	return (time.Duration((to>>18)-(from>>18)) * time.Millisecond).String()
}

// humanBytes formats n in IEC units.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// plural is "1 writer", "3 writers".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// onePrefix drops the "redokit: " of the library's own errors from a
// message the CLI prints after its own "redokit: ", at the start and where
// an error wraps one ("--end-ts N: redokit: read range above …").
func onePrefix(msg string) string {
	return strings.ReplaceAll(strings.TrimPrefix(msg, "redokit: "), ": redokit: ", ": ")
}

// noSpaceError is a full store's error as redokit says it: the cause is
// plain, and so are the commands that work on a full store.
type noSpaceError struct{ err error }

func (e *noSpaceError) Unwrap() error { return e.err }

func (e *noSpaceError) Error() string {
	msg := e.err.Error()
	if !strings.Contains(msg, "the store is full") {
		msg += fullHint(e.err)
	}
	return msg
}

// isMemStorage reports a mem:// store, which lives only as long as the
// process.
func isMemStorage(storage string) bool {
	return strings.HasPrefix(storage, "mem:")
}
