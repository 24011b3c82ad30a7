package main

import (
	"context"
	"fmt"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/axsched/ax/bench"
)

// gocronScheduler is the schedules scenario's peer: go-co-op/gocron/v2, a
// DurationJob per schedule at the scheduler's defaults (no singleton mode, no
// limit on concurrent jobs; each next run follows the previous scheduled run).
func gocronScheduler() bench.Factory {
	return bench.Factory{
		Name: "gocron", Mode: bench.Unbounded, Only: []string{"schedules"},
		Doc: "schedules only: go-co-op/gocron/v2, a DurationJob per schedule at the scheduler's defaults",
		Schedules: func(context.Context, bench.Params) (bench.ScheduleExecutor, error) {
			s, err := gocron.NewScheduler()
			if err != nil {
				return nil, fmt.Errorf("gocron: %w", err)
			}
			s.Start()
			return &gocronSchedules{s: s}, nil
		},
	}
}

// gocronSchedules adapts a started gocron scheduler.
type gocronSchedules struct {
	s gocron.Scheduler // immutable
}

var _ bench.ScheduleExecutor = (*gocronSchedules)(nil)

func (g *gocronSchedules) Every(d time.Duration, fire func()) (time.Time, error) {
	j, err := g.s.NewJob(gocron.DurationJob(d), gocron.NewTask(fire))
	if err != nil {
		return time.Time{}, fmt.Errorf("gocron: %w", err)
	}
	return j.NextRun()
}

func (g *gocronSchedules) Close() { _ = g.s.Shutdown() }
