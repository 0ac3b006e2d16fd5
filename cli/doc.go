// Package cli is the redokit command as a library: redokit inspects,
// verifies, replays and maintains redo logs of change data capture, on any
// storage backend redokit has a driver for. cmd/redokit is Main and nothing
// else.
//
//	redokit demo                      write, fail over, collect, replay and verify a log, locally
//	redokit gen    --storage --log    write a generated workload to a log
//	redokit meta   --storage --log    checkpoint, global resolved ts, writers and epochs
//	redokit ls     --storage --log    the segments
//	redokit dump   --storage --log    events of a range as JSON lines
//	redokit verify --storage --log    check every block, the chains, the order and the meta
//	redokit apply  --storage --log --sink URI   replay into MySQL, PostgreSQL or SQLite
//	redokit checkpoint set TS --storage --log   move the checkpoint (after a manual recovery)
//	redokit gc     --storage --log    delete segments below the checkpoint
//	redokit rm     --storage --log    delete a whole log
//	redokit check  --storage          is this bucket fit to hold a redo log?
//	redokit torture --storage --duration   kill writers, lose answers: does the log lose anything?
//	redokit bench  [--storage]        writer, reader and raw baselines on a storage
//	redokit writer ls|fence|rm --storage --log   see, fence and remove a dead writer
//
// Exit codes: 0 success; 1 failure, whatever the command (a verification
// that found problems, a log that does not exist, a store or sink that
// fails, a refusal to delete without --yes, an interrupt); 2 bad usage (an
// unknown command or flag, a missing required flag or argument, a malformed
// flag value, a --storage URL of an unknown scheme or with a parameter its
// backend does not take). With --json, a failure or usage error prints
// {"error": "...", "exit_code": N} on stdout as well as the text on stderr,
// unless the command printed its own JSON report first (verify, check,
// torture, demo; apply's summary of where it stopped, which then has "error"
// and "exit_code" too). Nothing is ever
// deleted, and the checkpoint never moved, without --yes or an interactive
// confirmation.
//
// A backend author builds redokit with their own driver in a five-line main
// that imports the driver's package (whose init calls blob.Register for its
// URL scheme) and calls Main; every command, check and torture among them,
// then opens that scheme's --storage URLs too (see docs/BACKENDS.md and
// examples/outsidedriver):
//
//	package main
//
//	import (
//		"github.com/redokit/redokit/cli"
//		_ "example.com/mystore/redokitdriver"
//	)
//
//	func main() { cli.Main() }
//
// The built-in backends are registered by this package: local disk (file://)
// and memory (mem://) always, and the cloud ones (s3, gs, azblob, gocloud+…)
// unless built with -tags redokit_nocloud.
package cli
