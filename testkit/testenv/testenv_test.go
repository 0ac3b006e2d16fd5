package testenv

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

func init() {
	RunChild("echo", func(args []string) error {
		fmt.Println("ready", strings.Join(args, ","))
		var line string
		for {
			if _, err := fmt.Scanln(&line); err != nil {
				return nil
			}
			if line == "fail" {
				return errors.New("asked to fail")
			}
			fmt.Println("echo", line)
		}
	})
}

func TestCountAndSeed(t *testing.T) {
	t.Setenv("REDOKIT_TESTENV_N", "")
	if n := Count(t, "REDOKIT_TESTENV_N", 7); n != 7 {
		t.Fatalf("Count unset = %d, want the default 7", n)
	}
	t.Setenv("REDOKIT_TESTENV_N", "12")
	if n := Count(t, "REDOKIT_TESTENV_N", 7); n != 12 {
		t.Fatalf("Count = %d, want 12", n)
	}
	if s := Seed(t, "REDOKIT_TESTENV_N", 3); s != 12 {
		t.Fatalf("Seed = %d, want 12", s)
	}
	for _, bad := range []string{"-1", "x", "1.5"} {
		t.Setenv("REDOKIT_TESTENV_N", bad)
		ft := &fatalT{TB: t}
		func() {
			defer func() { recover() }()
			Count(ft, "REDOKIT_TESTENV_N", 7)
		}()
		if !ft.failed {
			t.Errorf("Count accepted %q", bad)
		}
	}
}

// fatalT records a Fatalf and stops the caller with a panic.
type fatalT struct {
	testing.TB
	failed bool
}

func (f *fatalT) Helper() {}

func (f *fatalT) Fatalf(string, ...any) { f.failed = true; panic("fatal") }

func TestChild(t *testing.T) {
	c := StartChild(t, "echo", []string{"a", "b"})
	if l := c.Line(t); l != "ready a,b" {
		t.Fatalf("first line %q", l)
	}
	c.Send(t, "x")
	if l := c.Line(t); l != "echo x" {
		t.Fatalf("line %q, want echo x", l)
	}
	c.Finish(t)

	c = StartChild(t, "echo", nil)
	c.Line(t)
	c.Send(t, "fail")
	if err := c.Wait(); err == nil || !strings.Contains(c.Stderr(), "child echo: asked to fail") {
		t.Fatalf("a failing child: %v, stderr %q", err, c.Stderr())
	}

	c = StartChild(t, "echo", nil)
	c.Line(t)
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err == nil {
		t.Fatal("a killed child exited cleanly")
	}
	if IsChild() || os.Getenv(childRoleVar) != "" {
		t.Fatal("the parent thinks it is a child")
	}
}
