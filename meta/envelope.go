package meta

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/internal/retry"
)

// Errors of the stored objects. Each error that matches one names the key.
var (
	// ErrCorrupt: a stored state or meta object fails a check (envelope
	// layout, CRC-32C, a missing, unknown, duplicate or null field,
	// trailing data, a value out of its rules).
	ErrCorrupt = errors.New("meta: corrupt metadata object")
	// ErrUnsupportedVersion: a stored object of a version this build does
	// not read (version 1 was never released and is not readable).
	ErrUnsupportedVersion = errors.New("meta: unsupported metadata version")
	// ErrContended: a compare-and-swap loop lost every one of its bounded
	// attempts, or a read never saw one version twice in a row. On a store
	// that serves stale reads after an overwrite this is what a loop
	// meets instead of an end.
	ErrContended = errors.New("meta: compare-and-swap lost too many times in a row")
	// ErrForeignWrite: the object holds a version of this lease's epoch
	// that is neither the lease's last write nor one of its writes whose
	// outcome was open. Not a fence (no newer epoch is proven): another
	// process with the same epoch, or a store serving stale reads.
	ErrForeignWrite = errors.New("meta: object holds a write this lease did not make")
)

// The envelope every stored object of this package is written in (see
// docs/FORMAT.md): a JSON object whose bytes are exactly
//
//	{"version":4,"crc32c":"<8 lowercase hex digits>","body":<body>}
//
// with no whitespace and nothing after the closing brace. The CRC-32C
// (Castagnoli) is over the exact bytes of <body>, which is itself a
// compact JSON object. The layout is fixed byte for byte so that a decoder
// checks it by comparing, and a damaged byte anywhere is an error: in the
// fixed text or the final brace a layout error, in the version a version
// error, in the CRC or the body a checksum mismatch.
const (
	envVersionPrefix = `{"version":`
	envCRCPrefix     = `,"crc32c":"`
	envBodyPrefix    = `","body":`
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// seal wraps body in the envelope.
func seal(body []byte) []byte {
	out := make([]byte, 0, len(body)+64)
	out = append(out, envVersionPrefix...)
	out = strconv.AppendInt(out, StateVersion, 10)
	out = append(out, envCRCPrefix...)
	out = fmt.Appendf(out, "%08x", crc32.Checksum(body, castagnoli))
	out = append(out, envBodyPrefix...)
	out = append(out, body...)
	return append(out, '}')
}

// unseal checks the envelope of the object stored under key and returns its
// body and version: StateVersion, or the one before it (see decodeStrict).
func unseal(key string, data []byte) ([]byte, int, error) {
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("meta: %s: %s: %w", key, fmt.Sprintf(format, args...), ErrCorrupt)
	}
	rest, ok := bytes.CutPrefix(data, []byte(envVersionPrefix))
	if !ok {
		return nil, 0, corrupt("does not start with %q", envVersionPrefix)
	}
	n := 0
	for n < len(rest) && n < 10 && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	if n == 0 || rest[0] == '0' && n > 1 {
		return nil, 0, corrupt("no version number after %q", envVersionPrefix)
	}
	v, _ := strconv.Atoi(string(rest[:n]))
	if v < oldestStateVersion || v > StateVersion {
		if n < len(rest) && (rest[n] == ',' || rest[n] == '}') {
			return nil, 0, fmt.Errorf("meta: %s: version %d; this build reads versions %d to %d (version 1 was never released): %w", key, v, oldestStateVersion, StateVersion, ErrUnsupportedVersion)
		}
		return nil, 0, corrupt("malformed version")
	}
	rest, ok = bytes.CutPrefix(rest[n:], []byte(envCRCPrefix))
	if !ok || len(rest) < 8 {
		return nil, 0, corrupt("no %q after the version", envCRCPrefix)
	}
	var want uint32
	for _, c := range rest[:8] {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		default:
			return nil, 0, corrupt("checksum %q is not 8 lowercase hex digits", rest[:8])
		}
		want = want<<4 | uint32(d)
	}
	body, ok := bytes.CutPrefix(rest[8:], []byte(envBodyPrefix))
	if !ok || len(body) == 0 || body[len(body)-1] != '}' {
		return nil, 0, corrupt("no body, or data after it")
	}
	body = body[:len(body)-1]
	if got := crc32.Checksum(body, castagnoli); got != want {
		return nil, 0, corrupt("CRC-32C of the body is %08x, the envelope says %08x", got, want)
	}
	return body, v, nil
}

// decodeStrict decodes body into v (a pointer to a struct), refusing what a
// lenient JSON decoder would let through: an unknown field, a missing one
// (every field the type declares must be present), a key given twice, null
// for anything but a list or a map, and anything after the value.
//
// A field tagged `since:"3"` is new in that version: an object of an older
// version lacks it (and may not carry it), and it decodes as its zero value.
func decodeStrict(key string, body []byte, v any, version int) error {
	if err := checkValue(body, reflect.TypeOf(v).Elem(), "body", version); err != nil {
		return fmt.Errorf("meta: %s: %w: %w", key, err, ErrCorrupt)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("meta: %s: body: %w: %w", key, err, ErrCorrupt)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("meta: %s: data after the body: %w", key, ErrCorrupt)
	}
	return nil
}

var timeType = reflect.TypeFor[time.Time]()

// checkValue checks the fields of one JSON value against t, recursively;
// path names the value in errors.
func checkValue(raw []byte, t reflect.Type, path string, version int) error {
	raw = bytes.TrimSpace(raw)
	if bytes.Equal(raw, []byte("null")) {
		switch t.Kind() {
		case reflect.Slice, reflect.Map:
			return nil
		}
		return fmt.Errorf("%s is null", path)
	}
	switch {
	case t == timeType:
		return nil
	case t.Kind() == reflect.Struct:
		fields, err := objectFields(raw, path)
		if err != nil {
			return err
		}
		known := map[string]bool{}
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if since, _ := strconv.Atoi(f.Tag.Get("since")); since > version {
				continue // not in this version: an unknown field if present
			}
			known[name] = true
			fv, ok := fields[name]
			if !ok {
				return fmt.Errorf("%s: field %q is missing", path, name)
			}
			if err := checkValue(fv, f.Type, path+"."+name, version); err != nil {
				return err
			}
		}
		for name := range fields {
			if !known[name] {
				return fmt.Errorf("%s: unknown field %q", path, name)
			}
		}
	case t.Kind() == reflect.Map:
		fields, err := objectFields(raw, path)
		if err != nil {
			return err
		}
		for k, fv := range fields {
			if t.Key().Kind() == reflect.Uint64 {
				// A number key in its one form: "01" and "1" would be
				// two keys in the JSON and one in the map.
				if n, err := strconv.ParseUint(k, 10, 64); err != nil || strconv.FormatUint(n, 10) != k {
					return fmt.Errorf("%s: key %q is not an unsigned decimal without leading zeros", path, k)
				}
			}
			if err := checkValue(fv, t.Elem(), path+"["+strconv.Quote(k)+"]", version); err != nil {
				return err
			}
		}
	case t.Kind() == reflect.Slice:
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for i, e := range elems {
			if err := checkValue(e, t.Elem(), path+"["+strconv.Itoa(i)+"]", version); err != nil {
				return err
			}
		}
	}
	return nil
}

// objectFields splits a JSON object into its members, refusing a key given
// twice (encoding/json keeps the last one silently).
func objectFields(raw []byte, path string) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("%s is not an object", path)
	}
	out := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		name, _ := tok.(string)
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s: field %q appears twice", path, name)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%s.%s: %w", path, name, err)
		}
		out[name] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%s: data after the object", path)
	}
	return out, nil
}

// validToken reports whether s is a write token as newToken makes them.
func validToken(s string) bool {
	if len(s) != 32 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// newToken returns a fresh write token: 128 random bits, in hex. Every
// conditional write of a state or meta object carries a new one, so that a
// re-read can tell whether a write whose answer was lost landed.
func newToken() string {
	var b [16]byte
	if _, err := cryptoRand(b[:]); err != nil {
		// crypto/rand does not fail on supported platforms; a token
		// that is not unique would make a lost answer undecidable, so
		// this is not worth limping on.
		panic(fmt.Sprintf("meta: write token: %v", err))
	}
	return hex.EncodeToString(b[:])
}

var cryptoRand = crand.Read

// maxAttempts bounds every compare-and-swap loop of the package and the
// reads that want one version twice in a row.
const maxAttempts = 8

// casBackoff is the wait before attempt+1 of a loop: exponential from 5 ms,
// capped at 250 ms, with jitter so that racing processes spread out.
var casBackoff = retry.Backoff{First: 5 * time.Millisecond, Max: 250 * time.Millisecond, Jitter: true}

// backoff waits casBackoff's wait before attempt+1, or until ctx ends.
func backoff(ctx context.Context, attempt int) error {
	return retry.Sleep(ctx, casBackoff.Wait(attempt))
}

// readVersion reads the object under key, and with withETag also its ETag,
// both of one version: it stats, reads and stats again, and takes the pair
// only when the two stats agree. ETags are unique per content and every
// write of this package carries a fresh token, so equal ETags around the
// read prove that the read saw that version. Without withETag it is one
// read.
//
// A driver with the VersionReader capability gives both from one response
// (blob.Bucket.ReadVersion): then the pair is of one version even on a
// store whose reads lag its stats, which stat, read, stat cannot tell.
func readVersion(ctx context.Context, b *blob.Bucket, key string, withETag bool) ([]byte, string, error) {
	if !withETag {
		data, err := b.ReadAll(ctx, key)
		return data, "", err
	}
	if b.CanReadVersion() {
		data, a, err := b.ReadVersion(ctx, key)
		return data, a.ETag, err
	}
	for attempt := 0; ; attempt++ {
		before, err := b.Stat(ctx, key)
		if err != nil {
			return nil, "", err
		}
		data, err := b.ReadAll(ctx, key)
		if err != nil {
			return nil, "", err
		}
		after, err := b.Stat(ctx, key)
		if err != nil {
			return nil, "", err
		}
		if before.ETag == after.ETag {
			return data, after.ETag, nil
		}
		if attempt+1 >= maxAttempts {
			return nil, "", fmt.Errorf("meta: %s changed during each of %d reads in a row (ETag %s, then %s): %w", key, maxAttempts, before.ETag, after.ETag, ErrContended)
		}
		if err := backoff(ctx, attempt); err != nil {
			return nil, "", err
		}
	}
}

// definitive reports whether a failed put certainly stored nothing: it was
// refused before any request left (a closed bucket, an invalid key or
// argument). Every other failure leaves the outcome open.
func definitive(err error) bool {
	return errors.Is(err, blob.ErrClosed) || errors.Is(err, blob.ErrInvalidKey) || blob.CodeOf(err) == blob.CodeInvalidArgument
}
