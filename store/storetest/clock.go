package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/axsched/ax/store"
)

// exerciseClock checks a [store.Clock]: its Now is the clock its leases run on, and
// it fails after Close.
func exerciseClock(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Run("Clock/LeasesOnNow", func(t *testing.T) {
		s := newStore(t)
		ss, ok := s.(store.SharedStore)
		if !ok {
			t.Skip("not a SharedStore: no leases to compare")
		}
		c := s.(store.Clock)
		ctx := context.Background()
		const lease = time.Hour
		n0, err := c.Now(ctx)
		if err != nil {
			t.Fatalf("Now() = %v", err)
		}
		o, err := ss.Join(ctx, "clock", lease)
		if err != nil {
			t.Fatalf("Join() = %v", err)
		}
		n1, err := c.Now(ctx)
		if err != nil {
			t.Fatalf("Now() = %v", err)
		}
		if n1.Before(n0) {
			t.Errorf("Now() = %v after %v: went back", n1, n0)
		}
		owners, err := ss.Owners(ctx)
		if err != nil {
			t.Fatalf("Owners() = %v", err)
		}
		for _, oi := range owners {
			if oi.Epoch != o.Epoch {
				continue
			}
			// A lease ends lease after the store's now at the join, to its precision.
			if oi.Expires.Before(n0.Add(lease-time.Millisecond)) || oi.Expires.After(n1.Add(lease+time.Millisecond)) {
				t.Errorf("the lease expires at %v, want lease after the store's Now, between %v and %v", oi.Expires, n0.Add(lease), n1.Add(lease))
			}
			return
		}
		t.Errorf("Owners() = %+v: no owner of epoch %d", owners, o.Epoch)
	})
	t.Run("Clock/Closed", func(t *testing.T) {
		s := newStore(t)
		if err := s.Close(); err != nil {
			t.Fatalf("Close() = %v", err)
		}
		if _, err := s.(store.Clock).Now(context.Background()); !errors.Is(err, store.ErrStoreClosed) {
			t.Errorf("Now() after Close = %v, want ErrStoreClosed", err)
		}
	})
}
