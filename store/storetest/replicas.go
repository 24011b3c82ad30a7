package storetest

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/store"
)

// exerciseReplicas runs the cases of [store.ReplicaStore]. Exercise calls it when the
// store implements ReplicaStore.
func exerciseReplicas(t *testing.T, newStore func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		run  func(t *testing.T, s store.ReplicaStore)
	}{
		{"PublishAndList", testPublishAndList},
		{"PublishReplaces", testPublishReplaces},
		{"EndedNotListed", testReplicaEndedNotListed},
		{"PublishValidation", testPublishValidation},
	}
	for _, tt := range tests {
		t.Run("Replicas/"+tt.name, func(t *testing.T) {
			tt.run(t, newStore(t).(store.ReplicaStore))
		})
	}
}

// figures returns replica figures that use every field, told apart by n.
func figures(n int) store.ReplicaFigures {
	c := func(b uint64) store.ReplicaCounts {
		return store.ReplicaCounts{Submitted: b + 1, Succeeded: b + 2, Failed: b + 3, TimedOut: b + 4, Retried: b + 5, Rejected: b + 6}
	}
	r := func(b float64) store.ReplicaRates {
		return store.ReplicaRates{Submitted: b + 0.5, Succeeded: b + 1.25, Failed: b + 2, TimedOut: b + 3, Retried: b + 4, Rejected: b + 5}
	}
	u := uint64(n) * 100
	f := float64(n) * 10
	return store.ReplicaFigures{
		Version:  "ax v0." + strings.Repeat("9", n) + " <\"ünïcode\">",
		Queued:   store.ByPriority[int]{High: n, Normal: n + 1, Low: n + 2},
		Running:  store.ByPriority[int]{High: n + 3, Normal: n + 4, Low: n + 5},
		Delayed:  store.ByPriority[int]{High: n + 6, Normal: n + 7, Low: n + 8},
		Zombies:  n + 9,
		Degraded: n%2 == 1,
		Totals:   store.ByPriority[store.ReplicaCounts]{High: c(u), Normal: c(u + 10), Low: c(u + 20)},
		Rates:    store.ByPriority[store.ReplicaRates]{High: r(f), Normal: r(f + 1), Low: r(f + 2)},
		RateSpan: time.Duration(n) * 1500 * time.Millisecond,
		WaitP50:  store.ByPriority[time.Duration]{High: time.Microsecond, Normal: 2 * time.Millisecond, Low: 3 * time.Second},
		WaitP99:  store.ByPriority[time.Duration]{High: 4 * time.Microsecond, Normal: 5 * time.Millisecond, Low: time.Duration(n) * time.Minute},
	}
}

// replicas lists s's replicas by epoch, failing the test on an error.
func replicas(t *testing.T, s store.ReplicaStore) (map[uint64]store.Replica, time.Time) {
	t.Helper()
	rs, now, err := s.Replicas(context.Background())
	if err != nil {
		t.Fatalf("Replicas() error = %v", err)
	}
	if now.IsZero() {
		t.Fatalf("Replicas() now is zero")
	}
	m := make(map[uint64]store.Replica, len(rs))
	for i, r := range rs {
		if i > 0 && r.Epoch <= rs[i-1].Epoch {
			t.Fatalf("Replicas() = %+v, not by epoch", rs)
		}
		m[r.Epoch] = r
	}
	return m, now
}

func publish(t *testing.T, s store.ReplicaStore, o store.Owner, f store.ReplicaFigures) {
	t.Helper()
	if err := s.PublishReplica(context.Background(), o, f); err != nil {
		t.Fatalf("PublishReplica(%s/%d) error = %v", o.Name, o.Epoch, err)
	}
}

// testPublishAndList: every live owner is listed, with the figures it published
// (intact) and when, on the store's clock; one that published none has none.
func testPublishAndList(t *testing.T, s store.ReplicaStore) {
	a := join(t, s, "replica-a", longLease)
	b := join(t, s, "replica-b", longLease)
	if rs, _ := replicas(t, s); len(rs) != 2 || !rs[a.Epoch].Published.IsZero() || !rs[b.Epoch].Published.IsZero() {
		t.Fatalf("Replicas() before any publication = %+v, want a and b with no figures", rs)
	}
	_, before := replicas(t, s)
	publish(t, s, a, figures(1))
	rs, now := replicas(t, s)
	if len(rs) != 2 {
		t.Fatalf("Replicas() = %+v, want a and b", rs)
	}
	ra, rb := rs[a.Epoch], rs[b.Epoch]
	if ra.Name != a.Name || ra.Lease != a.Lease || !reflect.DeepEqual(ra.Figures, figures(1)) {
		t.Errorf("replica a = %+v, want owner %+v with figures %+v", ra, a, figures(1))
	}
	// Stores keep times to the microsecond or the millisecond.
	if ra.Published.Before(before.Add(-time.Millisecond)) || ra.Published.After(now.Add(time.Millisecond)) {
		t.Errorf("a published at %v, want between %v and %v", ra.Published, before, now)
	}
	if !ra.Expires.After(now) || ra.Expires.After(now.Add(longLease+time.Second)) {
		t.Errorf("a's lease expires at %v, want within %v after %v", ra.Expires, longLease, now)
	}
	if rb.Name != b.Name || !rb.Published.IsZero() || !reflect.DeepEqual(rb.Figures, store.ReplicaFigures{}) {
		t.Errorf("replica b = %+v, want owner %+v with no figures", rb, b)
	}
}

// testPublishReplaces: a publication replaces the owner's last one.
func testPublishReplaces(t *testing.T, s store.ReplicaStore) {
	a := join(t, s, "replica-a", longLease)
	publish(t, s, a, figures(2))
	rs, _ := replicas(t, s)
	first := rs[a.Epoch].Published
	publish(t, s, a, figures(3))
	rs, _ = replicas(t, s)
	if r := rs[a.Epoch]; !reflect.DeepEqual(r.Figures, figures(3)) || r.Published.Before(first) {
		t.Errorf("replica a = %+v, want the figures published last, published at or after %v", r, first)
	}
}

// testReplicaEndedNotListed: an owner that left, or whose name joined again, is
// not listed, and its late publication is no error and lists nothing.
func testReplicaEndedNotListed(t *testing.T, s store.ReplicaStore) {
	ctx := context.Background()
	a := join(t, s, "replica-a", longLease)
	b := join(t, s, "replica-b", longLease)
	publish(t, s, a, figures(1))
	publish(t, s, b, figures(2))
	if err := s.Leave(ctx, b); err != nil {
		t.Fatalf("Leave(b) error = %v", err)
	}
	a2 := join(t, s, "replica-a", longLease) // ends a
	publish(t, s, b, figures(4))
	rs, _ := replicas(t, s)
	if len(rs) != 1 || rs[a2.Epoch].Name != a2.Name || !rs[a2.Epoch].Published.IsZero() {
		t.Fatalf("Replicas() = %+v, want only a's new epoch %d, with no figures", rs, a2.Epoch)
	}
}

func testPublishValidation(t *testing.T, s store.ReplicaStore) {
	ctx := context.Background()
	a := join(t, s, "replica-a", longLease)
	long := figures(1)
	long.Version = strings.Repeat("v", store.ReplicaVersionMax+1)
	for _, c := range []struct {
		name string
		o    store.Owner
		f    store.ReplicaFigures
	}{
		{"long version", a, long},
		{"no name", store.Owner{Epoch: a.Epoch, Lease: a.Lease}, figures(1)},
		{"long name", store.Owner{Name: strings.Repeat("n", store.OwnerNameMax+1), Epoch: a.Epoch, Lease: a.Lease}, figures(1)},
	} {
		if err := s.PublishReplica(ctx, c.o, c.f); !errors.Is(err, store.ErrInvalidChange) {
			t.Errorf("PublishReplica(%s) = %v, want ErrInvalidChange", c.name, err)
		}
	}
	okVersion := figures(1)
	okVersion.Version = strings.Repeat("v", store.ReplicaVersionMax)
	publish(t, s, a, okVersion)
	if rs, _ := replicas(t, s); len(rs) != 1 || rs[a.Epoch].Figures.Version != okVersion.Version {
		t.Errorf("Replicas() = %+v, want a with the longest version", rs)
	}
}
