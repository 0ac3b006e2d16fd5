// Command redokit inspects, verifies, replays and maintains redo logs of
// change data capture. It is package github.com/redokit/redokit/cli's Main:
// see that package's doc for the commands and the exit codes, and
// docs/BACKENDS.md for building redokit with a driver of your own.
package main

import "github.com/redokit/redokit/cli"

func main() { cli.Main() }
