package bench

import (
	"context"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/schedule"
)

// ScheduleExecutor runs recurring jobs at fixed intervals. Implementations are
// safe for concurrent use.
type ScheduleExecutor interface {
	// Every adds a job whose targets are first, first+d, first+2d… (each
	// target follows the previous target, not the end of a run) and calls fire
	// at each of them. It returns first, the job's first target, d from now.
	Every(d time.Duration, fire func()) (first time.Time, err error)
	// Close stops the jobs and releases the executor. It is called once.
	Close()
}

// axSchedules adapts a kernel at its defaults and a scheduler bound to it: each
// job is a schedule.Every schedule at the default misfire and overlap policies.
type axSchedules struct {
	k *kernel.Kernel      // immutable
	s *schedule.Scheduler // immutable
}

var _ ScheduleExecutor = (*axSchedules)(nil)

func newAxSchedules() (ScheduleExecutor, error) {
	k, err := kernel.New(kernel.Config{})
	if err != nil {
		return nil, err
	}
	s, err := schedule.New(k, schedule.Config{})
	if err != nil {
		_ = k.Close()
		return nil, err
	}
	return &axSchedules{k: k, s: s}, nil
}

func (a *axSchedules) Every(d time.Duration, fire func()) (time.Time, error) {
	sc, err := a.s.Add(schedule.Every(d), func(context.Context, schedule.Fire) error {
		fire()
		return nil
	}, nil)
	if err != nil {
		return time.Time{}, err
	}
	return sc.Next(), nil
}

func (a *axSchedules) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	a.s.Stop()
	_ = a.k.Shutdown(ctx)
	_ = a.k.Close()
}
