package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/axsched/ax/store"
)

func testNamedLeases(t *testing.T, s store.SharedStore) {
	ctx := context.Background()
	f1, err := s.AcquireLease(ctx, "sched/report", "h1", longLease)
	if err != nil {
		t.Fatalf("AcquireLease(h1) error = %v", err)
	}
	if _, err := s.AcquireLease(ctx, "sched/report", "h2", longLease); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("AcquireLease(h2) of a held lease = %v, want ErrLeaseHeld", err)
	}
	if err := s.RenewLease(ctx, "sched/report", f1, longLease); err != nil {
		t.Fatalf("RenewLease(f1) error = %v", err)
	}
	// The holder acquires again: a new grant, the old fence is stale.
	f2, err := s.AcquireLease(ctx, "sched/report", "h1", longLease)
	if err != nil || f2 <= f1 {
		t.Fatalf("AcquireLease(h1) again = %d, %v; want a fence above %d", f2, err, f1)
	}
	if err := s.RenewLease(ctx, "sched/report", f1, longLease); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("RenewLease(stale fence) = %v, want ErrLeaseLost", err)
	}
	if err := s.ReleaseLease(ctx, "sched/report", f1); err != nil {
		t.Fatalf("ReleaseLease(stale fence) = %v, want nil", err)
	}
	if _, err := s.AcquireLease(ctx, "sched/report", "h2", longLease); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("AcquireLease(h2) after a stale release = %v, want ErrLeaseHeld", err)
	}
	if err := s.ReleaseLease(ctx, "sched/report", f2); err != nil {
		t.Fatalf("ReleaseLease(f2) error = %v", err)
	}
	f3, err := s.AcquireLease(ctx, "sched/report", "h2", longLease)
	if err != nil || f3 <= f2 {
		t.Fatalf("AcquireLease(h2) after release = %d, %v; want a fence above %d", f3, err, f2)
	}
	// Names are independent.
	if _, err := s.AcquireLease(ctx, "sched/other", "h1", longLease); err != nil {
		t.Fatalf("AcquireLease(other name) error = %v", err)
	}
}

func testNamedLeaseExpiry(t *testing.T, s store.SharedStore) {
	ctx := context.Background()
	f1, err := s.AcquireLease(ctx, "x", "h1", shortLease)
	if err != nil {
		t.Fatalf("AcquireLease(h1) error = %v", err)
	}
	deadline := time.Now().Add(leaseWait)
	var f2 uint64
	for {
		f2, err = s.AcquireLease(ctx, "x", "h2", longLease)
		if err == nil {
			break
		}
		if !errors.Is(err, store.ErrLeaseHeld) || time.Now().After(deadline) {
			t.Fatalf("AcquireLease(h2) = %v, want the lease once h1's ended", err)
		}
		pause(shortLease / 3)
	}
	if f2 <= f1 {
		t.Fatalf("fence after expiry = %d, want above %d", f2, f1)
	}
	if err := s.RenewLease(ctx, "x", f1, longLease); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("RenewLease(expired holder) = %v, want ErrLeaseLost", err)
	}
}
