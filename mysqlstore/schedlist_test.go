package mysqlstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

// TestSchedulesPages stores five schedules and reads them back two at a time, by
// name, each page after the last name of the one before.
func TestSchedulesPages(t *testing.T) {
	ctx := context.Background()
	s, _ := setup(t, mysqlstore.Options{})
	if got, err := s.Schedules(ctx, 0, ""); err != nil || len(got) != 0 {
		t.Fatalf("Schedules() on no schedules = %v, %v, want none", got, err)
	}
	var want []string
	for i := range 5 {
		name := fmt.Sprintf("s%d", 4-i)
		sc := store.StoredSchedule{Name: name, Spec: "@every 1m", Next: testNow.Add(time.Duration(i) * time.Minute), Paused: i == 2}
		if _, _, err := s.UpsertSchedule(ctx, sc); err != nil {
			t.Fatal(err)
		}
		want = append([]string{name}, want...)
	}
	var got []string
	after := ""
	for {
		page, err := s.Schedules(ctx, 2, after)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		if len(page) > 2 {
			t.Fatalf("Schedules(2, %q) returned %d schedules, want at most 2", after, len(page))
		}
		for _, sc := range page {
			got = append(got, sc.Name)
			if sc.Paused != (sc.Name == "s2") || !sc.Next.After(testNow.Add(-time.Second)) {
				t.Errorf("schedule %s = %+v: paused or next wrong", sc.Name, sc)
			}
		}
		after = page[len(page)-1].Name
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Schedules pages = %v, want %v", got, want)
	}
}
