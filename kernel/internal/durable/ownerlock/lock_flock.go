//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package ownerlock

import (
	"errors"
	"os"
	"syscall"
)

const supported = true

// lock takes the exclusive flock(2) lock of f without waiting; it reports false when
// another open file holds it.
func lock(f *os.File) (bool, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return false, err
	}
	var lerr error
	err = rc.Control(func(fd uintptr) {
		for {
			lerr = syscall.Flock(int(fd), syscall.LOCK_EX|syscall.LOCK_NB)
			if !errors.Is(lerr, syscall.EINTR) {
				return
			}
		}
	})
	switch {
	case err != nil:
		return false, err
	case errors.Is(lerr, syscall.EWOULDBLOCK):
		return false, nil
	case lerr != nil:
		return false, lerr
	}
	return true, nil
}
