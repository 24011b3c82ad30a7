package kernel

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/storekit"
)

// deadStore is a MemoryStore a kernel reaches through until kill: from then on every
// call of the kernel's fails, as if its process had died. It forwards Identity, so
// that a kernel on it takes its default name in the MemoryStore's namespace.
type deadStore struct {
	store.SharedStore
	mem  *storekit.MemoryStore
	dead atomic.Bool
}

var errDead = fmt.Errorf("the process is dead: %w", store.ErrStoreUnavailable)

func (s *deadStore) Identity(ctx context.Context) (string, error) { return s.mem.Identity(ctx) }

func (s *deadStore) CommitAs(ctx context.Context, o store.Owner, cs []store.Change) ([]error, error) {
	if s.dead.Load() {
		return nil, errDead
	}
	return s.mem.CommitAs(ctx, o, cs)
}

func (s *deadStore) Rescue(ctx context.Context, o store.Owner, limit int) ([]store.StoredTask, error) {
	if s.dead.Load() {
		return nil, errDead
	}
	return s.mem.Rescue(ctx, o, limit)
}

func (s *deadStore) Join(ctx context.Context, name string, lease time.Duration) (store.Owner, error) {
	if s.dead.Load() {
		return store.Owner{}, errDead
	}
	return s.mem.Join(ctx, name, lease)
}

func (s *deadStore) Claim(ctx context.Context, o store.Owner, req store.ClaimRequest) ([]store.StoredTask, time.Time, error) {
	if s.dead.Load() {
		return nil, time.Time{}, errDead
	}
	return s.mem.Claim(ctx, o, req)
}

func (s *deadStore) States(ctx context.Context, ids []string) ([]store.StoredTask, error) {
	if s.dead.Load() {
		return nil, errDead
	}
	return s.mem.States(ctx, ids)
}

func (s *deadStore) Leave(ctx context.Context, o store.Owner) error {
	if s.dead.Load() {
		return errDead
	}
	return s.mem.Leave(ctx, o)
}

func (s *deadStore) Owners(ctx context.Context) ([]store.OwnerInfo, error) {
	if s.dead.Load() {
		return nil, errDead
	}
	return s.mem.Owners(ctx)
}

func (s *deadStore) Get(ctx context.Context, id string) (store.StoredTask, error) {
	if s.dead.Load() {
		return store.StoredTask{}, errDead
	}
	return s.mem.Get(ctx, id)
}

// ownerOf returns the kernel's owner name now.
func ownerOf(k *Kernel) string { return k.Stats().Store.Owner }

// liveOwners returns the names of the live owners of s.
func liveOwners(t *testing.T, s store.SharedStore) []string {
	t.Helper()
	os, err := s.Owners(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range os {
		if o.Live {
			names = append(names, o.Name)
		}
	}
	return names
}

// openFiles returns the number of open file descriptors of the process, or -1 where
// /proc/self/fd does not list them.
func openFiles() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// TestOwnerDefaultNames: with Config.Owner empty, two live kernels on one store take
// different default names; Close gives its name (and the lock file's descriptor) back,
// and the next kernel on the store takes it; a kernel on another store has names of
// its own; Config.Owner is used as given.
func TestOwnerDefaultNames(t *testing.T) {
	s := storekit.NewMemoryStore()
	fds := openFiles()
	a, err := New(Config{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	if !a.dur.own.HoldsSlot() {
		_ = a.Close()
		skipWithoutFlock(t)
	}
	b := newTestKernel(t, Config{Store: s})
	na, nb := ownerOf(a), ownerOf(b)
	if na == nb || !strings.HasPrefix(na, "ax-") || !strings.HasSuffix(na, "-0") || !strings.HasSuffix(nb, "-1") {
		t.Fatalf("owners %q and %q; want two default names, slots 0 and 1", na, nb)
	}
	if live := liveOwners(t, s); len(live) != 2 {
		t.Fatalf("live owners %v, want both", live)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if n := openFiles(); fds >= 0 && n > fds+1 { // b holds one
		t.Errorf("%d open files after a's Close, want at most %d: the slot's file is left open", n, fds+1)
	}
	c := newTestKernel(t, Config{Store: s})
	if nc := ownerOf(c); nc != na {
		t.Errorf("a kernel after a's Close joined as %q, want a's name %q", nc, na)
	}

	other := newTestKernel(t, Config{Store: storekit.NewMemoryStore()})
	if no := ownerOf(other); no == na || no == nb || !strings.HasSuffix(no, "-0") {
		t.Errorf("a kernel on another store joined as %q, want slot 0 of a name of its own (not %q, %q)", no, na, nb)
	}
	if named := newTestKernel(t, Config{Store: s, Owner: "web-1"}); ownerOf(named) != "web-1" {
		t.Errorf("Config.Owner web-1: joined as %q", ownerOf(named))
	}
}

// TestOwnerRestartTakesTasksAtOnce: a kernel whose predecessor on the store died (its
// store calls fail from then on, its slot is free as a dead process's is) takes the
// predecessor's default name, and its Join ends the dead membership: it rescues the
// predecessor's tasks at New, long before the dead lease would end, and runs them.
func TestOwnerRestartTakesTasksAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := storekit.NewMemoryStore()
		ds := &deadStore{SharedStore: mem, mem: mem}
		const lease = time.Minute
		a, err := New(Config{Store: ds, Lease: lease})
		if err != nil {
			t.Fatal(err)
		}
		g := make(gate)
		if err := a.Register("k", func(ctx context.Context, _ []byte) error { return g.run(ctx) }); err != nil {
			t.Fatal(err)
		}
		const n = 5
		for i := range n {
			if _, err := a.SubmitDurable(context.Background(), DurableTask{Kind: "k", Payload: fmt.Appendf(nil, "t%d", i)}); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		name := ownerOf(a)
		if !a.dur.own.HoldsSlot() {
			close(g)
			_ = a.Close()
			skipWithoutFlock(t)
		}
		ds.dead.Store(true)
		a.dur.own.Release(nil) // the end of its process would let go of the lock
		t0 := time.Now()

		b := newTestKernel(t, Config{Store: mem, Lease: lease})
		if got := ownerOf(b); got != name {
			t.Fatalf("the restarted kernel joined as %q, want its predecessor's %q", got, name)
		}
		if got := b.Stats().Store.Rescued; got != n {
			t.Fatalf("Stats().Store.Rescued = %d at New, want the predecessor's %d tasks", got, n)
		}
		var ran atomic.Int64
		if err := b.Register("k", func(context.Context, []byte) error { ran.Add(1); return nil }); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got, took := ran.Load(), time.Since(t0); got != n || took >= lease/2 {
			t.Errorf("%d tasks ran %v after the restart, want %d long before the dead lease (%v) ended", got, took, n, lease)
		}
		close(g)
		_ = a.Close()
	})
}

// TestOwnerNameTakenElsewhere: when a kernel that does not see this one's slot (another
// host of the same name, simulated here by Config.Owner) joins under its default name
// and ends its membership, the kernel goes on under a generated name: the two do not
// end each other's memberships in turn.
func TestOwnerNameTakenElsewhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := storekit.NewMemoryStore()
		const lease = time.Second
		a := newTestKernel(t, Config{Store: s, Lease: lease})
		name := ownerOf(a)
		if !a.dur.own.HoldsSlot() {
			skipWithoutFlock(t)
		}
		b := newTestKernel(t, Config{Store: s, Lease: lease, Owner: name})
		for range 10 { // ten leases: heartbeats every fifth
			advance(lease)
		}
		if got := ownerOf(a); got == name || !strings.HasPrefix(got, "ax-") {
			t.Errorf("a's owner after b took its name: %q, want a generated one", got)
		}
		if st := b.Stats().Store; st.Owner != name || st.LeaseLost != 0 || st.Joins != 1 {
			t.Errorf("b's Stats().Store = %+v, want owner %q, joined once, no lease lost", st, name)
		}
		if st := a.Stats().Store; st.LeaseLost != 1 || st.Joins != 2 {
			t.Errorf("a's Stats().Store = %+v, want one lease lost and one join again", st)
		}
		if live := liveOwners(t, s); len(live) != 2 {
			t.Errorf("live owners %v, want a's and b's", live)
		}
	})
}

// skipWithoutFlock skips a test whose kernel holds no default-name slot on a system
// without flock(2), and fails it where flock(2) exists (Linux, where CI runs, and
// Darwin): there a kernel without a slot is a bug, and a skip would prove nothing.
func skipWithoutFlock(t *testing.T) {
	t.Helper()
	if runtime.GOOS == "linux" || runtime.GOOS == "darwin" {
		t.Fatalf("the kernel holds no default owner name slot on %s, which has flock(2)", runtime.GOOS)
	}
	t.Skip("no default owner names without flock(2)")
}
