package bench

import (
	"math"
	"testing"
)

func TestFold(t *testing.T) {
	mk := func(tps, other float64, series string) *Sample {
		return &Sample{
			Metrics: map[string]float64{"tasks_per_sec": tps, "a_first_by_name": other},
			Series:  []Series{{Name: series}},
			Notes:   []string{"same note"},
		}
	}
	samples := []*Sample{mk(30, 1, "slow"), mk(10, 2, "fast"), mk(20, 3, "typical")}
	r := fold("x", Blocking, "tasks_per_sec", samples, []string{"rep 4: boom"})
	if got, want := r.Metrics["tasks_per_sec"], (Stat{20, 10, 30}); got != want {
		t.Errorf("fold tasks_per_sec = %+v, want %+v", got, want)
	}
	if got, want := r.Metrics["a_first_by_name"], (Stat{2, 1, 3}); got != want {
		t.Errorf("fold a_first_by_name = %+v, want %+v", got, want)
	}
	if len(r.Series) != 1 || r.Series[0].Name != "typical" {
		t.Errorf("fold series = %+v, want those of the median tasks_per_sec repetition", r.Series)
	}
	if len(r.Notes) != 1 || len(r.Errors) != 1 || r.Mode != "blocking" {
		t.Errorf("fold notes %v, errors %v, mode %q: want one note, one error, blocking", r.Notes, r.Errors, r.Mode)
	}
}

func TestSampleCleanDropsNonFinite(t *testing.T) {
	s := newSample()
	s.Metrics["ok"] = 1
	s.Metrics["inf"] = math.Inf(1)
	s.Metrics["nan"] = math.NaN()
	s.clean()
	if len(s.Metrics) != 1 || len(s.Notes) != 2 {
		t.Errorf("clean left metrics %v and notes %v, want only ok and two notes", s.Metrics, s.Notes)
	}
}
