package schedule

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/kernel"
)

func TestWritePrometheus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, sch := setup(t, kernel.Config{}, Config{Name: "api"})
		a := mustSchedule(t, sch, Every(time.Second), noopFire, &Options{Name: "a"})
		mustSchedule(t, sch, Every(2*time.Second), noopFire, &Options{Name: "b"})
		advance(2500 * time.Millisecond) // a fires twice, b once
		a.Remove()                       // a's fires stay counted
		var sb strings.Builder
		if err := sch.WritePrometheus(&sb); err != nil {
			t.Fatalf("WritePrometheus() = %v", err)
		}
		got := sb.String()
		for _, want := range []string{
			"# TYPE ax_schedules gauge\nax_schedules{kernel=\"api\"} 1\n",
			"# TYPE ax_schedule_fires_total counter\nax_schedule_fires_total{kernel=\"api\"} 3\n",
			"ax_schedule_misfires_total{kernel=\"api\"} 0\n",
			"ax_schedule_skipped_total{kernel=\"api\"} 0\n",
			"ax_schedule_refused_total{kernel=\"api\"} 0\n",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("WritePrometheus() = %q, want it to hold %q", got, want)
			}
		}
	})
}

func TestWritePrometheusNoName(t *testing.T) {
	_, sch := setup(t, kernel.Config{}, Config{})
	var sb strings.Builder
	if err := sch.WritePrometheus(&sb); err != nil {
		t.Fatalf("WritePrometheus() = %v", err)
	}
	if !strings.Contains(sb.String(), "\nax_schedules 0\n") {
		t.Errorf("WritePrometheus() = %q, want an unlabelled ax_schedules 0", sb.String())
	}
}

func TestConfigName(t *testing.T) {
	for _, name := range []string{`a"b`, "a b", strings.Repeat("x", 65)} {
		c := Config{Name: name}
		var ce *kernel.ConfigError
		if err := c.Validate(); !errors.As(err, &ce) || ce.Field != "schedule.Config.Name" {
			t.Errorf("Config{Name: %q}.Validate() = %v, want a ConfigError for schedule.Config.Name", name, err)
		}
	}
	if c := (Config{Name: "api-1.x_y"}); c.Validate() != nil {
		t.Errorf("Config{Name: %q}.Validate() = %v, want nil", c.Name, c.Validate())
	}
}

func noopFire(context.Context, Fire) error { return nil }

func TestAddRefusesBadRetryAndGroup(t *testing.T) {
	_, sch := setup(t, kernel.Config{Groups: map[string]kernel.GroupConfig{"up": {}}}, Config{})
	for _, tc := range []struct {
		name  string
		o     Options
		field string
	}{
		{"retry", Options{Retry: &kernel.RetryPolicy{Multiplier: 0.5}}, "schedule.Options.Retry.Multiplier"},
		{"group", Options{Group: "nope"}, "schedule.Options.Group"},
	} {
		_, err := sch.Add(Every(time.Second), noopFire, &tc.o)
		var ce *kernel.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%s: Add() = %v, want a ConfigError for %s", tc.name, err, tc.field)
		}
	}
	if _, err := sch.Add(Every(time.Second), noopFire, &Options{Group: "up", Retry: &kernel.RetryPolicy{MaxAttempts: 2}}); err != nil {
		t.Errorf("Add(group up, a valid retry) = %v, want nil", err)
	}
}
