package testenv

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// A crash test runs the code under test in a child process, the test binary
// started again, so that it can SIGKILL it at any moment. The child side
// calls RunChild from an init function or TestMain, before any test runs;
// the parent calls StartChild.
const (
	childRoleVar = "REDOKIT_TEST_CHILD"      // the child's role
	childArgsVar = "REDOKIT_TEST_CHILD_ARGS" // its arguments, a JSON array of strings
)

// RunChild makes this process a child of role when the parent started it
// so (StartChild): it calls fn with the child's arguments and exits, with 0
// when fn returns nil and with 2, after printing the error on stderr,
// otherwise. In any other process it returns at once.
func RunChild(role string, fn func(args []string) error) {
	if os.Getenv(childRoleVar) != role {
		return
	}
	var args []string
	err := json.Unmarshal([]byte(os.Getenv(childArgsVar)), &args)
	if err == nil {
		err = fn(args)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "child %s: %v\n", role, err)
		os.Exit(2)
	}
	os.Exit(0)
}

// IsChild reports whether this process is a child started by StartChild.
func IsChild() bool { return os.Getenv(childRoleVar) != "" }

// ChildOption changes how StartChild wires the child's stderr.
type ChildOption func(*exec.Cmd, *Child)

// StderrTo sends the child's stderr to w instead of keeping it for
// (*Child).Stderr.
func StderrTo(w io.Writer) ChildOption {
	return func(cmd *exec.Cmd, _ *Child) { cmd.Stderr = w }
}

// StderrInLines interleaves the child's stderr with its stdout, in Lines.
func StderrInLines() ChildOption {
	return func(cmd *exec.Cmd, _ *Child) { cmd.Stderr = cmd.Stdout }
}

// Child is a running child process.
type Child struct {
	Cmd *exec.Cmd
	// Lines are the lines the child prints on stdout, closed when its
	// stdout ends. The child blocks once 65536 lines wait unread.
	Lines <-chan string
	// Done is closed when the child has exited and its output has been
	// read; Err then says how it ended.
	Done <-chan struct{}

	in     io.WriteCloser
	stderr lockedBuffer
	err    error
}

// StartChild starts the test binary again as a child of role with args
// (RunChild runs it). The child's stdout arrives in Lines, its stdin is
// Send's, and its stderr is kept for Stderr (unless an option sends it
// elsewhere); a child still running when the test ends is killed.
func StartChild(t testing.TB, role string, args []string, opts ...ChildOption) *Child {
	t.Helper()
	a, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.count=1")
	cmd.Env = append(os.Environ(), childRoleVar+"="+role, childArgsVar+"="+string(a),
		// A race-enabled child would otherwise sleep a second before it
		// exits, to let late reports through.
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	c := &Child{Cmd: cmd}
	if c.in, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &c.stderr
	for _, o := range opts {
		o(cmd, c)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines, done := make(chan string, 1<<16), make(chan struct{})
	c.Lines, c.Done = lines, done
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		// Wait only after the output is read: it closes the pipe.
		c.err = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		c.in.Close()
		select {
		case <-done:
		default:
			c.Kill() // only if a failed test left it running
			<-done
		}
	})
	return c
}

// Line returns the child's next line of stdout; it fails the test if the
// output ended.
func (c *Child) Line(t testing.TB) string {
	t.Helper()
	line, ok := <-c.Lines
	if !ok {
		t.Fatalf("child ended early (%v): %s", c.Wait(), c.Stderr())
	}
	return line
}

// Send writes line and a newline to the child's stdin.
func (c *Child) Send(t testing.TB, line string) {
	t.Helper()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

// Kill sends the child SIGKILL.
func (c *Child) Kill() error { return c.Cmd.Process.Kill() }

// Wait waits until the child has exited and its stdout has been read (the
// lines not taken from Lines are dropped), and says how it ended.
func (c *Child) Wait() error {
	for range c.Lines {
	}
	<-c.Done
	return c.err
}

// Finish closes the child's stdin and waits for it to exit; it fails the
// test unless the child exited with 0.
func (c *Child) Finish(t testing.TB) {
	t.Helper()
	c.in.Close()
	if err := c.Wait(); err != nil {
		t.Fatalf("child: %v: %s", err, c.Stderr())
	}
}

// Stderr is what the child printed on stderr so far (empty when an option
// sent it elsewhere).
func (c *Child) Stderr() string { return c.stderr.String() }

// lockedBuffer is a bytes.Buffer that the child's copier writes while the
// test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
