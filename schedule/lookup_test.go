package schedule

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/axsched/ax/kernel"
)

func TestSchedulerEntry(t *testing.T) {
	_, sch := setup(t, kernel.Config{}, Config{})
	noop := func(context.Context, Fire) error { return nil }
	cron, err := ParseCron("30 2 * * *", nil)
	if err != nil {
		t.Fatal(err)
	}
	named, err := sch.Add(cron, noop, &Options{Name: "nightly"})
	if err != nil {
		t.Fatal(err)
	}
	unnamed, err := sch.Add(Every(time.Hour), noop, &Options{Priority: kernel.Low})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		want *Entry
	}{
		{"nightly", named},
		{unnamed.Name(), unnamed},
		{"missing", nil},
		{"schedule-01", nil},
		{"schedule-99", nil},
		{"", nil},
	}
	for _, tt := range tests {
		if got := sch.Entry(tt.name); got != tt.want {
			t.Errorf("Entry(%q) = %p, want %p", tt.name, got, tt.want)
		}
	}
	if got := fmt.Sprint(named.Spec()); got != "30 2 * * *" {
		t.Errorf("Spec() = %q, want the cron text", got)
	}
	if err := named.Update(Every(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(named.Spec()); got != "@every 1m0s" {
		t.Errorf("Spec() after Update = %q, want %q", got, "@every 1m0s")
	}
	named.Remove()
	unnamed.Remove()
	if got := sch.Entry("nightly"); got != nil {
		t.Errorf("Entry(%q) after Remove = %p, want nil", "nightly", got)
	}
	if got := sch.Entry(unnamed.Name()); got != nil {
		t.Errorf("Entry(%q) after Remove = %p, want nil", unnamed.Name(), got)
	}
}
