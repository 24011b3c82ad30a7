package bench

import (
	"cmp"
	"fmt"
	"math"
	"time"
)

// Params are a scenario's knobs. A zero field takes the scenario's default;
// Scale shrinks or grows the defaults of N (and so of a run's duration) at once.
type Params struct {
	// N is the number of tasks (or timers). If zero, the scenario's default times Scale.
	N int `json:"n"`
	// Conc is the executors' concurrency: workers, goroutine limit or
	// MaxConcurrency. If zero, the scenario's default.
	Conc int `json:"conc"`
	// Queue is the capacity of the executors that queue (chanpool, pond, ax
	// per priority). If zero, QueueDefault.
	Queue int `json:"queue"`
	// Rate is the open-loop arrival rate in tasks per second. If zero, the
	// scenario's default.
	Rate float64 `json:"rate,omitempty"`
	// Work is each task's duration (a sleep). If zero, the scenario's default.
	Work time.Duration `json:"work_ns,omitempty"`
	// Duration is how long the arrivals of a fixed-time scenario (saturation)
	// last. If zero, the scenario's default times Scale.
	Duration time.Duration `json:"duration_ns,omitempty"`
	// Scale multiplies the default N and the default Duration. If zero, 1.
	Scale float64 `json:"scale,omitempty"`
	// Shrink divides the upstream delays of slow-upstream (50 ms … 30 s) and
	// the timeouts that go with them, and the firing intervals of schedules
	// (1–60 s). If zero, the scenario's default, else ShrinkDefault.
	Shrink float64 `json:"shrink,omitempty"`
	// Seed seeds the random draws of a run. If zero, 1.
	Seed uint64 `json:"seed,omitempty"`
}

// Defaults shared by the scenarios.
const (
	QueueDefault  = 10_000
	ShrinkDefault = 100
)

// resolve fills p's zero fields from def (a scenario's defaults), applying
// Scale to N and Duration.
func (p Params) resolve(def Params) Params {
	p.Scale = cmp.Or(p.Scale, 1)
	if p.N == 0 {
		p.N = max(1, int(math.Round(float64(def.N)*p.Scale)))
	}
	if p.Duration == 0 {
		p.Duration = time.Duration(math.Round(float64(def.Duration) * p.Scale))
	}
	p.Conc = cmp.Or(p.Conc, def.Conc, 500)
	p.Queue = cmp.Or(p.Queue, def.Queue, QueueDefault)
	p.Rate = cmp.Or(p.Rate, def.Rate)
	p.Work = cmp.Or(p.Work, def.Work)
	p.Shrink = cmp.Or(p.Shrink, def.Shrink, ShrinkDefault)
	p.Seed = cmp.Or(p.Seed, def.Seed, 1)
	return p
}

// Validate reports the first field out of range. The zero Params is valid.
func (p Params) Validate() error {
	switch {
	case p.N < 0:
		return fmt.Errorf("bench: Params.N = %d: must be >= 0", p.N)
	case p.Conc < 0:
		return fmt.Errorf("bench: Params.Conc = %d: must be >= 0", p.Conc)
	case p.Queue < 0:
		return fmt.Errorf("bench: Params.Queue = %d: must be >= 0", p.Queue)
	case p.Rate < 0 || math.IsNaN(p.Rate) || math.IsInf(p.Rate, 0):
		return fmt.Errorf("bench: Params.Rate = %v: must be a finite number >= 0", p.Rate)
	case p.Work < 0:
		return fmt.Errorf("bench: Params.Work = %v: must be >= 0", p.Work)
	case p.Duration < 0:
		return fmt.Errorf("bench: Params.Duration = %v: must be >= 0", p.Duration)
	case p.Scale < 0 || math.IsNaN(p.Scale) || math.IsInf(p.Scale, 0):
		return fmt.Errorf("bench: Params.Scale = %v: must be a finite number >= 0", p.Scale)
	case p.Shrink < 0 || math.IsNaN(p.Shrink) || math.IsInf(p.Shrink, 0):
		return fmt.Errorf("bench: Params.Shrink = %v: must be a finite number >= 0", p.Shrink)
	}
	return nil
}

// arrivalWindow is how long an open-loop schedule of p.N tasks at p.Rate lasts.
func (p Params) arrivalWindow() time.Duration {
	if p.Rate <= 0 || p.N <= 1 {
		return 0
	}
	return time.Duration(float64(p.N-1) / p.Rate * 1e9)
}
