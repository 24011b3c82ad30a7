package ownerlock

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// slotsMax is the number of slots of a namespace: [Take] tries slots 0 to slotsMax−1.
const slotsMax = 64

// hostMax is the most bytes of the host name in a slot's name, so that the name
// ("ax-" host "-" 6 hex digits "-" slot) stays within 64 bytes, the longest owner name.
const hostMax = 64 - len("ax--123456-") - len("63")

// ErrFull: every slot of the namespace is held. Returned (wrapped) by [Take].
var ErrFull = errors.New("ownerlock: every slot is held")

// Slot is a slot held by this process, and the owner name it stands for. Release it
// when done; a process that ends releases its slots with it.
type Slot struct {
	name string
	path string
	f    *os.File
	once sync.Once
}

// Name returns the slot's owner name: "ax-" + the host name (letters, digits, '.', '-'
// and '_' kept, other bytes replaced with '_', cut to fit) + "-" + 6 hex digits of the
// namespace + "-" + the slot's number, at most 64 bytes in all.
func (s *Slot) Name() string { return s.name }

// Release removes the slot's lock file and closes it, so that the slot is free again.
// It is idempotent and safe for concurrent use.
func (s *Slot) Release() {
	s.once.Do(func() {
		_ = os.Remove(s.path) // while locked: a taker that opened it sees it replaced
		_ = s.f.Close()
		held.Delete(s.path)
	})
}

// held is the set of lock files whose slot a Slot of this process holds.
var held sync.Map // path → struct{}

// Take takes the lowest free slot of the namespace of identity (see the package doc)
// under dir, or under the default directory when dir is "". It does not block. It
// returns an error wrapping [ErrFull] when every slot is held, one wrapping
// errors.ErrUnsupported on a system without flock(2), and the error of the file system
// when the directory or a lock file cannot be used. It is safe for concurrent use.
func Take(dir, identity string) (*Slot, error) {
	if !supported {
		return nil, fmt.Errorf("ownerlock: no flock(2) on this system: %w", errors.ErrUnsupported)
	}
	if dir == "" {
		dir = defaultDir()
	}
	host := cleanHost(os.Hostname())
	sum := sha256.Sum256([]byte(strings.Join([]string{machineID(), host, strconv.Itoa(os.Getuid()), identity}, "\x00")))
	ns := hex.EncodeToString(sum[:8])
	for n := range slotsMax {
		path := filepath.Join(dir, "ax-owner-"+ns+"-"+strconv.Itoa(n)+".lock")
		f, err := tryTake(path)
		if err != nil {
			return nil, err
		}
		if f != nil {
			return &Slot{name: "ax-" + host + "-" + ns[:6] + "-" + strconv.Itoa(n), path: path, f: f}, nil
		}
	}
	return nil, fmt.Errorf("ownerlock: %d slots in %s: %w", slotsMax, dir, ErrFull)
}

// tryTake locks the lock file at path and returns it, or nil when another holds it.
func tryTake(path string) (*os.File, error) {
	if _, loaded := held.LoadOrStore(path, struct{}{}); loaded {
		return nil, nil
	}
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if errors.Is(err, fs.ErrPermission) {
			held.Delete(path)
			return nil, nil // another user's file: their slot, or a stale one
		}
		if err != nil {
			held.Delete(path)
			return nil, fmt.Errorf("ownerlock: %w", err)
		}
		ok, err := lock(f)
		if !ok || err != nil {
			_ = f.Close()
			held.Delete(path)
			if err != nil {
				return nil, fmt.Errorf("ownerlock: lock %s: %w", path, err)
			}
			return nil, nil
		}
		// A holder removes its file before it lets go of it: when path no longer
		// names the file locked, the lock was the last holder's; take a new one.
		fi, ferr := f.Stat()
		pi, perr := os.Stat(path)
		if ferr != nil || perr != nil || !os.SameFile(fi, pi) {
			_ = f.Close()
			continue
		}
		// The holder's pid, for whoever looks at the directory.
		if err := f.Truncate(0); err == nil {
			_, _ = f.WriteString(strconv.Itoa(os.Getpid()) + "\n")
		}
		return f, nil
	}
}

// defaultDir returns os.UserCacheDir()/ax-owners, made if need be, or os.TempDir()
// when it cannot be made.
func defaultDir() string {
	if c, err := os.UserCacheDir(); err == nil {
		d := filepath.Join(c, "ax-owners")
		if err := os.MkdirAll(d, 0o700); err == nil {
			return d
		}
	}
	return os.TempDir()
}

// cleanHost returns the host name h for an owner name: letters, digits, '.', '-' and
// '_' kept, other bytes replaced with '_', at most hostMax bytes; "host" if unknown.
func cleanHost(h string, err error) string {
	if err != nil || h == "" {
		return "host"
	}
	b := []byte(h[:min(len(h), hostMax)])
	for i, c := range b {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '-', c == '_':
		default:
			b[i] = '_'
		}
	}
	return string(b)
}

// machineID returns the host's machine ID where the system keeps one in a file (most
// Linux systems), or "".
func machineID() string {
	for _, p := range []string{"/etc/machine-id", "/var/lib/dbus/machine-id"} {
		if b, err := os.ReadFile(p); err == nil {
			if id := strings.TrimSpace(string(b)); id != "" {
				return id
			}
		}
	}
	return ""
}
