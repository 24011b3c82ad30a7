package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

// TestRoundTrips counts the commands a store sends through a proxy, each a round trip:
// a group commit by an owner (the journal's hot path) takes one, START TRANSACTION,
// the renewal, the writes with their guards and COMMIT as one query; a heartbeat one; inserts
// through InsertAs one (the query holds its COMMIT); a claim that takes tasks seven
// (BEGIN and the renewal in one query).
func TestRoundTrips(t *testing.T) {
	db := openDB(t)
	table := ownTable(t, db, "roundtrip")
	_, s, p := proxyStores(t, table, mysqlstore.Options{Retention: -1})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o, err := s.Join(ctx, "rt", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := s.Join(ctx, "pool", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	var inserts, starts, pooled, more []store.Change
	for i := range 100 {
		id := fmt.Sprintf("t%03d", i)
		inserts = append(inserts, insertChange(id, now, false))
		more = append(more, insertChange("i"+id, now, false))
		starts = append(starts, startChange(id, 1, now))
		pooled = append(pooled, insertChange("p"+id, now, true))
	}
	commitAs(t, s, pool, pooled...) // warms the pools' connections too
	for _, tt := range []struct {
		name string
		do   func()
		want int
	}{
		{"CommitAs inserts", func() { commitAs(t, s, o, inserts...) }, 1},
		{"CommitAs starts", func() { commitAs(t, s, o, starts...) }, 1},
		{"CommitAs heartbeat", func() { commitAs(t, s, o) }, 1},
		{"InsertAs inserts", func() {
			res, err := s.InsertAs(ctx, o, more)
			if err != nil || errors.Join(res...) != nil {
				t.Fatalf("InsertAs() = %v, %v", res, err)
			}
		}, 1},
		{"Claim", func() {
			ts, _, err := s.Claim(ctx, o, store.ClaimRequest{Now: time.Now(), Want: store.ByPriority[int]{Normal: 10}, Kinds: []string{"k"}})
			if err != nil || len(ts) != 10 {
				t.Fatalf("Claim() = %d tasks, %v; want 10", len(ts), err)
			}
		}, 7},
	} {
		before := p.commands()
		tt.do()
		if got := p.commands() - before; got != tt.want {
			t.Errorf("%s: %d round trips, want %d", tt.name, got, tt.want)
		} else {
			t.Logf("%s: %d round trips", tt.name, got)
		}
	}
}
