package kernel_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/storekit"
)

// TestKernelPublishesReplica: a kernel on a store.ReplicaStore publishes its
// figures at once and then every fifth of its lease, as its owner, with rates
// over the time between two publications; other kernels on the store read them.
func TestKernelPublishesReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := storekit.NewMemoryStore()
		k := newTestKernel(t, kernel.Config{Store: s, Owner: "replica-a", Lease: 10 * time.Second})
		other := newTestKernel(t, kernel.Config{Store: s, Owner: "replica-b", Lease: 10 * time.Second})
		synctest.Wait()
		list := func() map[string]store.Replica {
			t.Helper()
			rs, _, err := s.Replicas(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			m := map[string]store.Replica{}
			for _, r := range rs {
				m[r.Name] = r
			}
			return m
		}
		rs := list()
		a, b := rs["replica-a"], rs["replica-b"]
		if len(rs) != 2 || a.Published.IsZero() || b.Published.IsZero() || a.Epoch != k.Stats().Store.Epoch || b.Epoch != other.Stats().Store.Epoch {
			t.Fatalf("Replicas() = %+v, want both kernels published at once as their owners", rs)
		}
		if !strings.HasPrefix(a.Figures.Version, "ax ") || a.Figures.RateSpan != 0 {
			t.Errorf("first figures = %+v, want an ax version and no rates", a.Figures)
		}
		g := make(gate)
		for range 4 {
			if _, err := k.TrySubmit(kernel.Task{Priority: kernel.Low, Run: g.run}); err != nil {
				t.Fatal(err)
			}
		}
		for range 2 {
			if _, err := k.TrySubmit(kernel.Task{Priority: kernel.High, Delay: time.Hour, Run: g.run}); err != nil {
				t.Fatal(err)
			}
		}
		advance(2 * time.Second) // a fifth of the lease since the first publication
		f := list()["replica-a"].Figures
		if f.RateSpan != 2*time.Second || f.Running.Low != 4 || f.Delayed.High != 2 || f.Totals.Low.Submitted != 4 || f.Rates.Low.Submitted != 2 {
			t.Errorf("figures = %+v, want 4 Low running, 2 High delayed, 4 Low submitted at 2/s over 2 s", f)
		}
		g.open()
		advance(2 * time.Second)
		if f := list()["replica-a"].Figures; f.Totals.Low.Succeeded != 4 || f.Rates.Low.Succeeded != 2 || f.Running.Low != 0 || f.Rates.Low.Submitted != 0 {
			t.Errorf("figures = %+v, want the 4 Low successes at 2/s, none running, none submitted since", f)
		}
		if err := k.Close(); err != nil {
			t.Fatal(err)
		}
		if rs := list(); len(rs) != 1 || rs["replica-b"].Name == "" {
			t.Errorf("Replicas() after a's Close = %+v, want b only", rs)
		}
	})
}
