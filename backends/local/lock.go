//go:build unix

package local

import (
	"context"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// numStripes is the number of key stripes. It is part of the on-disk
// protocol (see the package doc): changing it breaks mutual exclusion with
// processes that run the old value.
const numStripes = 64

// stripeOf returns the stripe of key: FNV-1a (32-bit) of the key, modulo
// numStripes.
func stripeOf(key string) int {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	return int(h % numStripes)
}

// stripe is one lock of the key space: a semaphore for the goroutines of this
// process, then flock(2) on the stripe's file for other processes. flock
// cannot tell goroutines apart (they share the open file), hence both.
type stripe struct {
	sem chan struct{} // capacity 1
	f   *os.File      // opened lazily, while holding sem
}

func (s *stripe) close() {
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
}

// lock takes the stripe lock of key, waiting at most until ctx ends, and
// returns its release. The caller must be inside enter/exit.
func (d *Driver) lock(ctx context.Context, key string) (unlock func(), err error) {
	i := stripeOf(key)
	s := &d.stripes[i]
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if s.f == nil {
		if s.f, err = d.openStripe(i); err != nil {
			<-s.sem
			return nil, err
		}
	}
	// Control keeps the descriptor alive while it runs, so a Close racing
	// with a wait below cannot make flock act on a reused descriptor number.
	rc, err := s.f.SyscallConn()
	if err != nil {
		<-s.sem
		return nil, err
	}
	flock := func(how int) error {
		var ferr error
		if err := rc.Control(func(fd uintptr) {
			ferr = ignoringEINTR(func() error { return unix.Flock(int(fd), how) })
		}); err != nil {
			return err
		}
		return ferr
	}
	// Not the named result: the abandoned waiter below needs it after the
	// results are set to nil.
	release := func() {
		flock(unix.LOCK_UN)
		<-s.sem
	}
	err = flock(unix.LOCK_EX | unix.LOCK_NB)
	if err == nil {
		return release, nil
	}
	if err != unix.EWOULDBLOCK {
		<-s.sem
		return nil, fmt.Errorf("local: lock stripe %02x: %w", i, err)
	}
	// Another process holds it: wait in a goroutine so that ctx can end the
	// wait. If ctx wins, the goroutine still gets the lock eventually and
	// must give it back, and only then may this process use the stripe again.
	if err := d.trace("lock-wait", key); err != nil {
		<-s.sem
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- flock(unix.LOCK_EX) }()
	select {
	case err := <-done:
		if err != nil {
			<-s.sem
			return nil, fmt.Errorf("local: lock stripe %02x: %w", i, err)
		}
		return release, nil
	case <-ctx.Done():
		go func() {
			if err := <-done; err == nil {
				release()
			} else {
				<-s.sem
			}
		}()
		return nil, ctx.Err()
	}
}

// openStripe opens (creating it) the lock file of stripe i.
func (d *Driver) openStripe(i int) (*os.File, error) {
	_, lockFD, err := d.internalDirs()
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("%02x", i)
	fd, err := retryEINTR(func() (int, error) {
		return unix.Openat(lockFD, name, unix.O_RDONLY|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, d.filePerm)
	})
	if err != nil {
		return nil, pathErr("open", internalName+"/lock/"+name, err)
	}
	return os.NewFile(uintptr(fd), internalName+"/lock/"+name), nil
}

// internalDirs returns the descriptors of <root>/.redokit/tmp and
// <root>/.redokit/lock, creating the directories on first use (so that a
// read-only root can still be read). The first opening of tmp sweeps the
// temporary files of dead writers. The caller must be inside enter/exit.
func (d *Driver) internalDirs() (tmpFD, lockFD int, err error) {
	in := &d.internal
	in.Lock()
	defer in.Unlock()
	if in.tmpFD >= 0 {
		return in.tmpFD, in.lockFD, nil
	}
	open := func(parent int, name, path string) (int, error) {
		if err := unix.Mkdirat(parent, name, d.dirPerm); err != nil && err != unix.EEXIST {
			return -1, pathErr("mkdir", path, err)
		}
		fd, err := openDirAt(parent, name)
		switch err {
		case nil:
			return fd, nil
		case unix.ENOTDIR, unix.ELOOP, unix.EMLINK:
			return -1, d.notADir(parent, name, path, path, true)
		}
		return -1, pathErr("open", path, err)
	}
	top, err := open(d.rootFD, internalName, internalName)
	if err != nil {
		return -1, -1, err
	}
	defer unix.Close(top)
	t, err := open(top, "tmp", internalName+"/tmp")
	if err != nil {
		return -1, -1, err
	}
	l, err := open(top, "lock", internalName+"/lock")
	if err != nil {
		unix.Close(t)
		return -1, -1, err
	}
	in.tmpFD, in.lockFD = t, l
	d.sweep(t)
	return t, l, nil
}

// sweep removes the temporary files of dead writers: a live writer holds an
// flock on its file from creation to rename, so a file whose flock can be
// taken is abandoned. Best effort: errors only leave files behind.
func (d *Driver) sweep(tmpFD int) {
	dfd, err := openDirAt(tmpFD, ".")
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(dfd), internalName+"/tmp")
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return
	}
	for _, name := range names {
		if !isTempName(name) {
			continue
		}
		fd, err := unix.Openat(tmpFD, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) == nil {
			unix.Unlinkat(tmpFD, name, 0)
		}
		unix.Close(fd)
	}
}
