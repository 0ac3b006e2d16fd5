package cli

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	_ "github.com/redokit/redokit/backends/local"
	_ "github.com/redokit/redokit/backends/mem"
)

// Main runs redokit on this process's command line and exits with its exit
// code (see the package doc). It is the whole main of a redokit binary, the
// built-in one or one built with an outside driver: torture re-executes the
// running binary as its writer processes, so that binary must be one whose
// main is Main (or calls Run with its own arguments) and registers the same
// drivers.
func Main() {
	// The first interrupt cancels the context so that writers close, readers
	// stop and check cleans its scratch prefix up; a second one kills.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Run runs redokit with args (the command line without the program name)
// and returns the exit code: 0 success, 1 failure, 2 bad usage. It does not
// exit and installs no signal handler: cancelling ctx interrupts the command
// as SIGINT does under Main.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return newApp(stdin, stdout, stderr).execute(ctx, args)
}
