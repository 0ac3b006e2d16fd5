package backendtest_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/testkit/backendtest"
)

// The shared checks hold on the in-memory backend: what the cloud backends'
// tests run against their emulators, where this machine may have none.
func TestChecksOnMem(t *testing.T) {
	b := mem.New()
	t.Cleanup(func() { b.Close() })
	backendtest.WrongSize(t, b)
	backendtest.UnknownSize(t, b, 3000, 2<<20)
	backendtest.IfNotExistRace(t, b, 1000, 300<<10)
	backendtest.IfMatch(t, b, `"missing"`, 100, 300<<10)
	backendtest.ListAndDelete(t, b, 300, 16, nil)
	backendtest.CancelMidUpload(t, b, map[string]int64{"small": 512 << 10})
	d := mem.NewDriver()
	backendtest.Closed(t, blob.NewBucket(d), d)
}

func TestCorrupter(t *testing.T) {
	var got []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
	}))
	defer srv.Close()
	c := &backendtest.Corrupter{Base: http.DefaultTransport, Match: func(r *http.Request) bool { return r.Method == http.MethodPut }}
	body := bytes.Repeat([]byte("a"), 100)
	for i, want := range []bool{true, false} {
		req, _ := http.NewRequest(http.MethodPut, srv.URL, bytes.NewReader(body))
		resp, err := c.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if corrupted := !bytes.Equal(got, body); corrupted != want || len(got) != len(body) {
			t.Fatalf("request %d: corrupted %v (%d bytes), want %v", i, corrupted, len(got), want)
		}
	}
	if !c.Corrupted() {
		t.Fatal("Corrupted says no")
	}
}
