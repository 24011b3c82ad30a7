package schedule

import (
	"io"

	"github.com/axsched/ax/internal/promtext"
)

// totals are the counters of a scheduler's removed schedules, kept so that the
// ax_schedule*_total counters never go down when a schedule is removed.
type totals struct {
	fires, misfires, skipped, refused uint64
}

func (t *totals) add(st Stats) {
	t.fires += st.Fires
	t.misfires += st.Misfires
	t.skipped += st.Skipped
	t.refused += st.Refused
}

// WritePrometheus writes the scheduler's figures in the Prometheus text format: the
// gauge ax_schedules (schedules not removed) and the counters
// ax_schedule_fires_total, ax_schedule_misfires_total, ax_schedule_skipped_total and
// ax_schedule_refused_total, each the sum over every schedule the scheduler had (see
// [Stats]). Each series carries the label kernel="<Config.Name>" when Config.Name is
// set, as the kernel's own series do, so that both can be served on one page. It takes
// the scheduler's lock and returns the first write error.
func (s *Scheduler) WritePrometheus(w io.Writer) error {
	s.mu.Lock()
	n := 0
	t := s.removed
	add := func(e *Entry) {
		n++
		t.add(e.statsLocked())
	}
	for _, e := range s.named {
		add(e)
	}
	for _, e := range s.unnamed {
		if e.flags&flagRemoved == 0 {
			add(e)
		}
	}
	s.mu.Unlock()
	label := ""
	if s.cfg.Name != "" {
		label = `kernel="` + s.cfg.Name + `"` // Validate admits nothing that needs escaping
	}
	var b []byte
	fam := func(name, typ, help string, v uint64) {
		b = append(b, "# HELP "+name+" "+help+"\n# TYPE "+name+" "+typ+"\n"...)
		b = promtext.AppendSample(b, name, label, v)
	}
	fam("ax_schedules", "gauge", "Schedules of the scheduler not removed.", uint64(n))
	fam("ax_schedule_fires_total", "counter", "Occurrences the scheduler submitted, all schedules together.", t.fires)
	fam("ax_schedule_misfires_total", "counter", "Targets that did not fire because they were late, all schedules together.", t.misfires)
	fam("ax_schedule_skipped_total", "counter", "Occurrences the overlap policy did not submit, all schedules together.", t.skipped)
	fam("ax_schedule_refused_total", "counter", "Occurrences the kernel had no room for, all schedules together.", t.refused)
	_, err := w.Write(b)
	return err
}
