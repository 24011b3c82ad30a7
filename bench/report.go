package bench

import (
	"math"
	"slices"
)

// maxPoints bounds the points of a series kept in a report.
const maxPoints = 120

// Sample is what one run of a scenario on one executor measured.
type Sample struct {
	// Metrics maps snake_case names with a unit suffix (tasks_per_sec,
	// wait_p99_us_high) to values.
	Metrics map[string]float64 `json:"metrics"`
	// Series are figures over the run's time, for charts.
	Series []Series `json:"series,omitempty"`
	// Notes explain figures that need it (a lost task, an unbounded executor).
	Notes []string `json:"notes,omitempty"`
}

func newSample() *Sample { return &Sample{Metrics: map[string]float64{}} }

// clean drops the metrics that are not finite numbers (JSON cannot carry
// them), naming each in a note.
func (s *Sample) clean() {
	for name, v := range s.Metrics {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			delete(s.Metrics, name)
			s.note(name + " left out: not a finite number")
		}
	}
}

func (s *Sample) note(msg string) {
	if !slices.Contains(s.Notes, msg) {
		s.Notes = append(s.Notes, msg)
	}
}

// Series is one figure over time: V[i] at T[i] seconds from the run's start.
type Series struct {
	Name string    `json:"name"`
	Unit string    `json:"unit,omitempty"`
	T    []float64 `json:"t"`
	V    []float64 `json:"v"`
}

func (s *Series) add(t, v float64) {
	s.T = append(s.T, t)
	s.V = append(s.V, v)
}

// thin returns s with at most n points, keeping the largest value of each
// group of neighbours so that peaks survive.
func (s Series) thin(n int) Series {
	if len(s.T) <= n || n <= 0 {
		return s
	}
	out := Series{Name: s.Name, Unit: s.Unit}
	per := int(math.Ceil(float64(len(s.T)) / float64(n)))
	for i := 0; i < len(s.T); i += per {
		j := min(i+per, len(s.T))
		out.add(s.T[i], slices.Max(s.V[i:j]))
	}
	return out
}

// Report is the result of one scenario over every executor and repetition;
// it is the JSON that axbench -json writes.
type Report struct {
	Scenario string   `json:"scenario"`
	Doc      string   `json:"doc"`
	Params   Params   `json:"params"`
	Machine  Machine  `json:"machine"`
	Reps     int      `json:"reps"`
	Results  []Result `json:"results"`
}

// Result returns the result of the executor called name.
func (r *Report) Result(name string) (Result, bool) {
	for _, res := range r.Results {
		if res.Executor == name {
			return res, true
		}
	}
	return Result{}, false
}

// Result is one executor's figures in a [Report].
type Result struct {
	Executor string          `json:"executor"`
	Mode     string          `json:"mode"`
	Metrics  map[string]Stat `json:"metrics"`
	// Series come from the repetition whose key metric ([Scenario.Key]) is the
	// (lower) median one.
	Series []Series `json:"series,omitempty"`
	Notes  []string `json:"notes,omitempty"`
	// Errors lists repetitions that failed; their figures are left out.
	Errors []string `json:"errors,omitempty"`
}

// fold turns the samples of one executor's repetitions into a Result.
func fold(exec string, mode Mode, key string, samples []*Sample, errs []string) Result {
	r := Result{Executor: exec, Mode: mode.String(), Metrics: map[string]Stat{}, Errors: errs}
	var names []string
	for _, s := range samples {
		for name := range s.Metrics {
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
		for _, n := range s.Notes {
			if !slices.Contains(r.Notes, n) {
				r.Notes = append(r.Notes, n)
			}
		}
	}
	slices.Sort(names)
	vs := make([]float64, 0, len(samples))
	for _, name := range names {
		vs = vs[:0]
		for _, s := range samples {
			if v, ok := s.Metrics[name]; ok {
				vs = append(vs, v)
			}
		}
		r.Metrics[name] = StatOf(vs)
	}
	if len(samples) > 0 {
		r.Series = medianSample(samples, key).Series
	}
	return r
}

// medianSample returns the sample whose value of metric key is the lower
// median, so that charts show a typical repetition.
func medianSample(samples []*Sample, key string) *Sample {
	sorted := slices.Clone(samples)
	slices.SortStableFunc(sorted, func(a, b *Sample) int {
		av, bv := a.Metrics[key], b.Metrics[key]
		switch {
		case av < bv:
			return -1
		case av > bv:
			return 1
		}
		return 0
	})
	return sorted[(len(sorted)-1)/2]
}
