//go:build unix

package local_test

import (
	"context"
	"fmt"
	"log"
	"net/url"
	"os"

	_ "github.com/redokit/redokit/backends/local" // registers file://
	"github.com/redokit/redokit/blob"
)

func Example() {
	dir, err := os.MkdirTemp("", "redokit-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	u := url.URL{Scheme: "file", Path: dir, RawQuery: "create_dir=true"}
	b, err := blob.Open(ctx, u.String())
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	for _, key := range []string{"logs/cf1/b", "logs/cf1/a", "logs/cf1-old/x"} {
		if _, err := b.Put(ctx, key, []byte("hello from "+key), nil); err != nil {
			log.Fatal(err)
		}
	}
	data, err := b.ReadAll(ctx, "logs/cf1/a")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(data))

	// Keys come back in byte order, not in directory-walk order:
	// "logs/cf1-old/x" sorts before "logs/cf1/a" because '-' < '/'.
	for a, err := range b.List(ctx, "logs/") {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(a.Key, a.Size)
	}
	// Output:
	// hello from logs/cf1/a
	// logs/cf1-old/x 25
	// logs/cf1/a 21
	// logs/cf1/b 21
}
