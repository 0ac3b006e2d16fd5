package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redokit/redokit/blob"
)

// op is one Bucket operation, for the subtests that try them all.
type op struct {
	name string
	do   func(ctx context.Context, b *blob.Bucket) error
}

// ops are every Bucket operation that reaches the driver, on the keys
// "ops/existing" (which the caller has put) and "ops/new" (which it has not).
func (s *suite) ops() []op {
	ops := []op{
		{"Put", func(ctx context.Context, b *blob.Bucket) error {
			_, err := b.Put(ctx, "ops/new", []byte("new"), nil)
			return err
		}},
		{"PutOverwrite", func(ctx context.Context, b *blob.Bucket) error {
			_, err := b.Put(ctx, "ops/existing", []byte("overwritten"), nil)
			return err
		}},
		{"PutReader", func(ctx context.Context, b *blob.Bucket) error {
			_, err := b.PutReader(ctx, "ops/new", bytes.NewReader([]byte("new")), -1, nil)
			return err
		}},
		{"Stat", func(ctx context.Context, b *blob.Bucket) error {
			_, err := b.Stat(ctx, "ops/existing")
			return err
		}},
		{"StatMissing", func(ctx context.Context, b *blob.Bucket) error {
			_, err := b.Stat(ctx, "ops/new")
			return err
		}},
		{"Exists", func(ctx context.Context, b *blob.Bucket) error {
			_, err := b.Exists(ctx, "ops/existing")
			return err
		}},
		{"ReadAll", func(ctx context.Context, b *blob.Bucket) error {
			_, err := b.ReadAll(ctx, "ops/existing")
			return err
		}},
		{"ReadRange", func(ctx context.Context, b *blob.Bucket) error {
			_, err := b.ReadRange(ctx, "ops/existing", 1, 2)
			return err
		}},
		{"ReadRangeEmpty", func(ctx context.Context, b *blob.Bucket) error {
			_, err := b.ReadRange(ctx, "ops/existing", 0, 0)
			return err
		}},
		{"ListPage", func(ctx context.Context, b *blob.Bucket) error {
			_, err := b.ListPage(ctx, "", blob.ListOptions{})
			return err
		}},
		{"List", func(ctx context.Context, b *blob.Bucket) error {
			for _, err := range b.List(ctx, "ops/") {
				return err
			}
			return errors.New("list yielded nothing, not even an error")
		}},
		{"Delete", func(ctx context.Context, b *blob.Bucket) error {
			return b.Delete(ctx, "ops/existing")
		}},
		{"DeleteMissing", func(ctx context.Context, b *blob.Bucket) error {
			return b.Delete(ctx, "ops/new")
		}},
	}
	if s.h.ConditionalWrites {
		ops = append(ops,
			op{"PutIfNotExist", func(ctx context.Context, b *blob.Bucket) error {
				_, err := b.Put(ctx, "ops/new", []byte("new"), &blob.PutOptions{IfNotExist: true})
				return err
			}},
			op{"PutIfMatch", func(ctx context.Context, b *blob.Bucket) error {
				a, err := b.Stat(context.WithoutCancel(ctx), "ops/existing")
				if err != nil {
					return fmt.Errorf("(setup) %w", err)
				}
				_, err = b.Put(ctx, "ops/existing", []byte("swapped"), &blob.PutOptions{IfMatch: a.ETag})
				return err
			}})
	}
	if s.h.Append {
		ops = append(ops, op{"OpenAppend", func(ctx context.Context, b *blob.Bucket) error {
			f, err := b.OpenAppend(ctx, "ops/appended")
			if err == nil {
				f.Close()
			}
			return err
		}})
	}
	return ops
}

// context: every operation honours an ended context, and changes nothing.
func (s *suite) context(t T) {
	cases := []struct {
		name string
		want error
		ctx  func(context.Context) (context.Context, context.CancelFunc)
	}{
		{"DeadlineExceeded", context.DeadlineExceeded, func(p context.Context) (context.Context, context.CancelFunc) {
			return context.WithDeadline(p, time.Now().Add(-time.Minute))
		}},
		{"Canceled", context.Canceled, func(p context.Context) (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(p)
			cancel()
			return ctx, cancel
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t T) {
			e := s.bucket(t)
			original := []byte("original")
			put(t, e.b, "ops/existing", original)
			for _, o := range s.ops() {
				ctx, cancel := c.ctx(t.Context())
				err := o.do(ctx, e.b)
				cancel()
				if err == nil {
					t.Errorf("%s with an ended context succeeded; want an error matching %v", o.name, c.want)
				} else if !errors.Is(err, c.want) {
					t.Errorf("%s with an ended context: %v (code %v); want an error matching %v", o.name, err, blob.CodeOf(err), c.want)
				}
			}
			wantContent(t, e.b, "ops/existing", original, "after every operation failed on an ended context")
			s.settle(t, e.b, "", []string{"ops/existing"}, "after every operation failed on an ended context")
		})
	}
}

// closed: every operation after Close fails with ErrClosed.
func (s *suite) closed(t T) {
	e := s.bucket(t)
	put(t, e.b, "ops/existing", []byte("original"))
	first := e.b.Close()
	if first != nil {
		t.Errorf("Close: %v", first)
	}
	if err := e.b.Close(); err != first {
		t.Errorf("second Close = %v, want the first's %v", err, first)
	}
	view, err := e.b.Prefixed("view/")
	if err != nil {
		t.Fatalf("Prefixed on a closed bucket: %v", err)
	}
	ops := s.ops()
	if !s.h.Append {
		// The capability check comes after the closed check: still ErrClosed.
		ops = append(ops, op{"OpenAppend", func(ctx context.Context, b *blob.Bucket) error {
			_, err := b.OpenAppend(ctx, "ops/appended")
			return err
		}})
	}
	buckets := []*blob.Bucket{e.b, view}
	if e.root != e.b {
		buckets = append(buckets, e.root)
	}
	for _, b := range buckets {
		for _, o := range ops {
			err := o.do(t.Context(), b)
			if !errors.Is(err, blob.ErrClosed) {
				t.Errorf("%s on bucket %q after Close: %v; want an error matching blob.ErrClosed", o.name, b.Prefix(), err)
			}
		}
	}
}

// as: the escape hatch says no to what it does not have.
func (s *suite) as(t T) {
	e := s.bucket(t)
	if e.b.As(nil) {
		t.Errorf("As(nil) = true")
	}
	type notAClient struct{}
	var p *notAClient
	if e.b.As(&p) {
		t.Errorf("As(**notAClient) = true for a type no driver can have")
	}
}
