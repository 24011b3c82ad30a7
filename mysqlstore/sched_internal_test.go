package mysqlstore

import (
	"context"
	"testing"
	"time"

	"github.com/axsched/ax/store"
)

// TestFireTryAfterLostAnswer: a fire whose answer was lost (the connection dropped as
// it committed) is tried again with unknown set. When the lost try committed, the
// retry reads the schedule, finds its own fire token and reports that fire, without
// firing again; when another fire (another token) moved the schedule, it reports no
// fire of its own.
func TestFireTryAfterLostAnswer(t *testing.T) {
	s := openStore(t, "fire_lost")
	ctx := context.Background()
	if err := s.checkPacket(ctx); err != nil {
		t.Fatal(err)
	}
	t0 := time.UnixMilli(1_900_000_000_000).UTC()
	if _, _, err := s.UpsertSchedule(ctx, store.StoredSchedule{Name: "lost", Spec: "@every 1s", Next: t0}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	occ := func(at time.Time) store.Change {
		return store.Change{Op: store.OpInsert, Pool: true, Task: store.StoredTask{
			ID: store.OccurrenceID("lost", at), Kind: "k", State: store.Queued, Fence: 1, RunAt: at, CreatedAt: now, UpdatedAt: now,
		}}
	}
	f := store.ScheduleFire{Name: "lost", Expect: t0, Next: t0.Add(time.Second), Occurrences: []store.Change{occ(t0)}}
	const token = 12345
	// The try whose answer is lost: it commits.
	if _, fired, err := s.fireTry(ctx, f, s.fireUpdate(f, token), s.occurrenceInserts(f), token, false); err != nil || !fired {
		t.Fatalf("first try: fired %v, %v; want fired", fired, err)
	}
	// Its retry finds its token: the fire is reported, not made again.
	got, fired, err := s.fireTry(ctx, f, s.fireUpdate(f, token), s.occurrenceInserts(f), token, true)
	if err != nil || !fired || !got.Next.Equal(f.Next) || got.Version != 1 {
		t.Fatalf("retry after a lost answer = %+v, fired %v, %v; want the first try's fire (version 1)", got, fired, err)
	}
	// Another fire of the next occurrence lands; a retry with the older token finds
	// someone else's token and the next time moved: no fire of its own.
	g := store.ScheduleFire{Name: "lost", Expect: f.Next, Next: f.Next.Add(time.Second), Occurrences: []store.Change{occ(f.Next)}}
	if _, fired, err := s.fireTry(ctx, g, s.fireUpdate(g, token+1), s.occurrenceInserts(g), token+1, false); err != nil || !fired {
		t.Fatalf("second fire: fired %v, %v; want fired", fired, err)
	}
	got, fired, err = s.fireTry(ctx, f, s.fireUpdate(f, token), s.occurrenceInserts(f), token, true)
	if err != nil || fired || !got.Next.Equal(g.Next) {
		t.Fatalf("stale retry = %+v, fired %v, %v; want no fire, next %v", got, fired, err, g.Next)
	}
	if st, err := s.Get(ctx, store.OccurrenceID("lost", t0)); err != nil || st.State != store.Queued {
		t.Fatalf("occurrence at t0: %+v, %v; want stored once, queued", st, err)
	}
}
