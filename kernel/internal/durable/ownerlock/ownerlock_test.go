package ownerlock

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
)

// take is Take that fails the test on an error and releases the slot in t.Cleanup.
func take(t *testing.T, dir, identity string) *Slot {
	t.Helper()
	s, err := Take(dir, identity)
	if err != nil {
		t.Fatalf("Take(%q) = %v", identity, err)
	}
	t.Cleanup(s.Release)
	return s
}

// crash lets go of s as the end of its process would: the lock file stays, its lock
// goes.
func crash(s *Slot) {
	_ = s.f.Close()
	held.Delete(s.path)
}

// slotOf returns the slot number at the end of an owner name.
func slotOf(name string) string { return name[strings.LastIndexByte(name, '-')+1:] }

func skipUnsupported(t *testing.T) {
	t.Helper()
	if !supported {
		if runtime.GOOS == "linux" || runtime.GOOS == "darwin" {
			t.Fatalf("ownerlock is built without flock(2) on %s, which has it", runtime.GOOS)
		}
		t.Skip("no flock(2) on this system")
	}
}

// TestTakeLiveHoldersDiffer: two live slots of one namespace never share a name, and
// the lowest free slot is taken.
func TestTakeLiveHoldersDiffer(t *testing.T) {
	skipUnsupported(t)
	dir := t.TempDir()
	a := take(t, dir, "store-1")
	b := take(t, dir, "store-1")
	if a.Name() == b.Name() {
		t.Fatalf("two live slots named %q", a.Name())
	}
	if slotOf(a.Name()) != "0" || slotOf(b.Name()) != "1" {
		t.Errorf("names %q, %q; want slots 0 and 1", a.Name(), b.Name())
	}
	a.Release()
	c := take(t, dir, "store-1")
	if c.Name() != a.Name() {
		t.Errorf("after a released: Take() = %q, want the lowest free slot %q", c.Name(), a.Name())
	}
}

// TestTakeAfterCrash: a holder that ended without Release (its lock file left behind)
// leaves its slot to the next Take, under the same name.
func TestTakeAfterCrash(t *testing.T) {
	skipUnsupported(t)
	dir := t.TempDir()
	a := take(t, dir, "store-1")
	crash(a)
	if _, err := os.Stat(a.path); err != nil {
		t.Fatalf("the crashed holder's lock file: %v, want it left behind", err)
	}
	b := take(t, dir, "store-1")
	if b.Name() != a.Name() {
		t.Errorf("Take() after a crash = %q, want the crashed holder's %q", b.Name(), a.Name())
	}
}

// TestRelease: Release removes the lock file and frees the slot; it is idempotent.
func TestRelease(t *testing.T) {
	skipUnsupported(t)
	dir := t.TempDir()
	a := take(t, dir, "store-1")
	a.Release()
	a.Release()
	if _, err := os.Stat(a.path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("lock file after Release: %v, want none", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("directory after Release holds %d files, want none", len(ents))
	}
}

// TestTakeNamespaces: stores of other identities have slots of their own, and names
// that differ; one identity gives the same names every time.
func TestTakeNamespaces(t *testing.T) {
	skipUnsupported(t)
	dir := t.TempDir()
	a := take(t, dir, "store-1")
	b := take(t, dir, "store-2")
	if a.Name() == b.Name() || slotOf(b.Name()) != "0" {
		t.Errorf("names %q and %q; want different names, both slot 0", a.Name(), b.Name())
	}
	a.Release()
	if c := take(t, dir, "store-1"); c.Name() != a.Name() {
		t.Errorf("Take() = %q, want %q again", c.Name(), a.Name())
	}
	if n := a.Name(); len(n) > 64 || !strings.HasPrefix(n, "ax-") {
		t.Errorf("Name() = %q, want at most 64 bytes starting with ax-", n)
	}
}

// TestTakeFull: once every slot is held, Take returns ErrFull.
func TestTakeFull(t *testing.T) {
	skipUnsupported(t)
	dir := t.TempDir()
	for range slotsMax {
		take(t, dir, "store-1")
	}
	if s, err := Take(dir, "store-1"); !errors.Is(err, ErrFull) {
		if s != nil {
			s.Release()
		}
		t.Fatalf("Take() with every slot held = %v, want ErrFull", err)
	}
}

// TestTakeUnlinked: a file locked after its holder removed it (the lock a taker may
// win in a race with Release) holds no slot.
func TestTakeUnlinked(t *testing.T) {
	skipUnsupported(t)
	dir := t.TempDir()
	a := take(t, dir, "store-1")
	f, err := os.Open(a.path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	a.Release()
	if ok, err := lock(f); !ok || err != nil {
		t.Fatalf("lock() of the removed file = %v, %v; want it locked", ok, err)
	}
	if b := take(t, dir, "store-1"); b.Name() != a.Name() {
		t.Errorf("Take() = %q, want slot 0 (%q): a lock on a removed file holds nothing", b.Name(), a.Name())
	}
}

// TestCleanHost: host names keep their safe bytes and fit.
func TestCleanHost(t *testing.T) {
	tests := []struct {
		name, in string
		err      error
		want     string
	}{
		{"plain", "web-1.example.com", nil, "web-1.example.com"},
		{"unsafe bytes", "a b/c\u00e9", nil, "a_b_c__"},
		{"long", strings.Repeat("h", 80), nil, strings.Repeat("h", hostMax)},
		{"unknown", "", nil, "host"},
		{"error", "x", errors.New("no name"), "host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := cleanHost(tt.in, tt.err); got != tt.want {
				t.Errorf("cleanHost(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
	if n := len("ax-" + strings.Repeat("h", hostMax) + "-123456-63"); n != 64 {
		t.Errorf("longest name = %d bytes, want 64", n)
	}
}

const (
	envHolder      = "AX_OWNERLOCK_HOLDER" // the directory: TestHolderChild takes a slot there
	holderIdentity = "store-1"
)

// TestTakeAcrossProcesses: a slot held by another live process is not taken; once
// that process is killed (SIGKILL: no Release), the slot and its name are free again.
func TestTakeAcrossProcesses(t *testing.T) {
	skipUnsupported(t)
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHolderChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envHolder+"="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stdin.Close() }()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := false
	defer func() {
		if !waited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the child's name: %v", err)
	}
	childName := strings.TrimPrefix(strings.TrimSpace(line), "name ")

	a := take(t, dir, holderIdentity)
	if a.Name() == childName {
		t.Fatalf("Take() = %q while the child holds it", a.Name())
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	waited = true
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 2 {
		t.Fatalf("directory after the kill: %d files, %v; want 2 (the child's lock file left behind, and a's)", len(ents), err)
	}
	b := take(t, dir, holderIdentity)
	if b.Name() != childName {
		t.Errorf("Take() after the child was killed = %q, want its name %q", b.Name(), childName)
	}
}

// TestHolderChild is the child of TestTakeAcrossProcesses: it takes a slot, prints its
// name and holds it until killed (or its stdin closes). Without AX_OWNERLOCK_HOLDER it
// returns at once.
func TestHolderChild(t *testing.T) {
	dir := os.Getenv(envHolder)
	if dir == "" {
		return
	}
	s, err := Take(dir, holderIdentity)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	if _, err := os.Stdout.WriteString("name " + s.Name() + "\n"); err != nil {
		t.Fatal(err)
	}
	done := time.AfterFunc(time.Minute, func() { os.Exit(2) }) // an orphan ends
	defer done.Stop()
	_, _ = io.Copy(io.Discard, os.Stdin)
}
