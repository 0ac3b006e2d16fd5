// Package toxinet injects the faults of the redo conformance suite's Network
// tier (conformance/redo) with toxiproxy, for the tests of the backends that
// run against an emulator behind a toxiproxy proxy (scripts/emulators.sh).
package toxinet

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"

	"github.com/redokit/redokit/conformance"
	"github.com/redokit/redokit/conformance/redo"
)

// The toxiproxy client sends its API requests through http.DefaultTransport.
// Toxiproxy's API server drops a connection idle for 10 s (its read
// timeout), and a request that reuses the connection at that moment fails
// with EOF, which net/http does not retry for a DELETE or a POST: a test
// that removed a toxic after a 10 s stall failed so in CI, and left the
// toxic in place for the tests after it. Connections idle for 5 s are
// closed on this side first.
func init() {
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		t.IdleConnTimeout = 5 * time.Second
	}
}

type toxic struct {
	name, kind, stream string
	toxicity           float32
	attrs              toxiproxy.Attributes
}

// toxics are what each fault is on the proxy.
var toxics = map[redo.Fault][]toxic{
	redo.FaultLatency: {
		{"net-lat-down", "latency", "downstream", 1, toxiproxy.Attributes{"latency": 100, "jitter": 50}},
		{"net-lat-up", "latency", "upstream", 1, toxiproxy.Attributes{"latency": 30}},
	},
	// Per connection: the bucket must open one per request for this to
	// roll per request.
	redo.FaultReset: {
		{"net-reset", "reset_peer", "upstream", 0.5, toxiproxy.Attributes{"timeout": 0}},
	},
	// Nothing gets through until the toxic is removed: the attempt under
	// way times out and is retried.
	redo.FaultStall: {
		{"net-stall", "timeout", "upstream", 1, toxiproxy.Attributes{"timeout": 0}},
	},
	redo.FaultBandwidth: {
		{"net-bw-up", "bandwidth", "upstream", 1, toxiproxy.Attributes{"rate": 256}},
		{"net-bw-down", "bandwidth", "downstream", 1, toxiproxy.Attributes{"rate": 256}},
	},
}

// Inject returns a redo.Network's Inject that adds the toxics of a fault to
// p and removes them, once, when the fault is turned off.
func Inject(p *toxiproxy.Proxy) func(t conformance.TB, f redo.Fault) (off func()) {
	return func(t conformance.TB, f redo.Fault) func() {
		var added []string
		for _, x := range toxics[f] {
			if _, err := p.AddToxic(x.name, x.kind, x.stream, x.toxicity, x.attrs); err != nil {
				t.Errorf("toxiproxy: add %s (%s %s): %v", x.name, x.kind, x.stream, err)
				continue
			}
			added = append(added, x.name)
		}
		var once sync.Once
		return func() {
			once.Do(func() {
				for _, name := range added {
					if err := p.RemoveToxic(name); err != nil {
						t.Errorf("toxiproxy: remove %s: %v", name, err)
					}
				}
			})
		}
	}
}

// Proxy returns the proxy name of the toxiproxy server at addr with every
// toxic removed, now and when t ends.
func Proxy(t conformance.TB, addr, name string) (*toxiproxy.Proxy, error) {
	p, err := toxiproxy.NewClient(addr).Proxy(name)
	if err != nil {
		return nil, fmt.Errorf("toxiproxy proxy %s: %w", name, err)
	}
	if err := Clear(p); err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		if err := Clear(p); err != nil {
			t.Errorf("toxiproxy: %v", err)
		}
	})
	return p, nil
}

// Clear removes every toxic of p and enables it, so that a test starts from
// a clean proxy whatever an earlier one left.
func Clear(p *toxiproxy.Proxy) error {
	xs, err := p.Toxics()
	if err != nil {
		return err
	}
	for _, x := range xs {
		if err := p.RemoveToxic(x.Name); err != nil {
			return err
		}
	}
	if !p.Enabled {
		return p.Enable()
	}
	return nil
}
