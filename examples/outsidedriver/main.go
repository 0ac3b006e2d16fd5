// Command outsidedriver is redokit built with a driver redokit does not
// ship: the five-line main a backend author writes (docs/BACKENDS.md).
// Every redokit command opens tinyfs:// URLs in it: redokit check
// --storage tinyfs:///tmp/x, redokit torture --storage tinyfs:///tmp/x, ...
package main

import (
	"github.com/redokit/redokit/cli"
	_ "github.com/redokit/redokit/examples/outsidedriver/tinyfs"
)

func main() { cli.Main() }
