package main

import (
	"bytes"
	"context"
	"errors"
	"sort"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store/storekit"
)

// promWant is every family a kernel with a store writes, and its type.
var promWant = map[string]dto.MetricType{
	"ax_tasks_submitted_total":     dto.MetricType_COUNTER,
	"ax_tasks_started_total":       dto.MetricType_COUNTER,
	"ax_tasks_succeeded_total":     dto.MetricType_COUNTER,
	"ax_tasks_failed_total":        dto.MetricType_COUNTER,
	"ax_tasks_timed_out_total":     dto.MetricType_COUNTER,
	"ax_tasks_retried_total":       dto.MetricType_COUNTER,
	"ax_tasks_rejected_total":      dto.MetricType_COUNTER,
	"ax_tasks_evicted_total":       dto.MetricType_COUNTER,
	"ax_tasks_canceled_total":      dto.MetricType_COUNTER,
	"ax_tasks_panics_total":        dto.MetricType_COUNTER,
	"ax_tasks_abandoned_total":     dto.MetricType_COUNTER,
	"ax_retries_refused_total":     dto.MetricType_COUNTER,
	"ax_ontimeout_dropped_total":   dto.MetricType_COUNTER,
	"ax_events_dropped_total":      dto.MetricType_COUNTER,
	"ax_callback_panics_total":     dto.MetricType_COUNTER,
	"ax_logs_dropped_total":        dto.MetricType_COUNTER,
	"ax_queue_depth":               dto.MetricType_GAUGE,
	"ax_tasks_delayed":             dto.MetricType_GAUGE,
	"ax_tasks_running":             dto.MetricType_GAUGE,
	"ax_tasks_dispatched":          dto.MetricType_GAUGE,
	"ax_zombies":                   dto.MetricType_GAUGE,
	"ax_executors":                 dto.MetricType_GAUGE,
	"ax_callbacks_abandoned":       dto.MetricType_GAUGE,
	"ax_task_wait_seconds":         dto.MetricType_HISTOGRAM,
	"ax_task_exec_seconds":         dto.MetricType_HISTOGRAM,
	"ax_store_commits_total":       dto.MetricType_COUNTER,
	"ax_store_changes_total":       dto.MetricType_COUNTER,
	"ax_store_commit_errors_total": dto.MetricType_COUNTER,
	"ax_store_refused_total":       dto.MetricType_COUNTER,
	"ax_store_prestarted_total":    dto.MetricType_COUNTER,
	"ax_store_pending":             dto.MetricType_GAUGE,
	"ax_store_up":                  dto.MetricType_GAUGE,
	"ax_store_joins_total":         dto.MetricType_COUNTER,
	"ax_store_lease_lost_total":    dto.MetricType_COUNTER,
	"ax_store_rescued_total":       dto.MetricType_COUNTER,
	"ax_store_claimed_total":       dto.MetricType_COUNTER,
	"ax_store_pool_following":      dto.MetricType_GAUGE,
}

// TestPrometheusExpositionParses parses the page of two named kernels sharing one
// set with the Prometheus text parser: no error, every family with its help and
// type, every series labelled with its kernel, the histograms complete.
func TestPrometheusExpositionParses(t *testing.T) {
	set := metrics.NewSet()
	api := newPromKernel(t, kernel.Config{Name: "api", Metrics: set, Store: storekit.NewMemoryStore()})
	batch := newPromKernel(t, kernel.Config{Name: "batch", Metrics: set})
	h, err := api.TrySubmit(kernel.Task{Run: func(context.Context) error { return nil }})
	if err != nil {
		t.Fatalf("TrySubmit() = %v", err)
	}
	if err := h.Wait(context.Background()); err != nil {
		t.Fatalf("Wait() = %v", err)
	}
	h, err = batch.TrySubmit(kernel.Task{
		Priority: kernel.Low, Retry: &kernel.RetryPolicy{MaxAttempts: 1},
		Run: func(context.Context) error { return errors.New("boom") },
	})
	if err != nil {
		t.Fatalf("TrySubmit() = %v", err)
	}
	if err := h.Wait(context.Background()); err == nil {
		t.Fatalf("Wait() = nil, want the task's error")
	}

	var buf bytes.Buffer
	set.WritePrometheus(&buf)
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("TextToMetricFamilies() = %v, want nil; the page:\n%s", err, buf.String())
	}
	var names []string
	for name := range fams {
		names = append(names, name)
	}
	sort.Strings(names)
	if len(fams) != len(promWant) {
		t.Errorf("families = %q, want the %d of promWant", names, len(promWant))
	}
	for name, typ := range promWant {
		f := fams[name]
		if f == nil {
			t.Errorf("family %s missing", name)
			continue
		}
		if f.GetType() != typ || f.GetHelp() == "" {
			t.Errorf("family %s: type %v, help %q; want %v and a help text", name, f.GetType(), f.GetHelp(), typ)
		}
		kernels := map[string]int{}
		for _, m := range f.GetMetric() {
			k := label(m, "kernel")
			if k != "api" && k != "batch" {
				t.Errorf("family %s: series %v: kernel label %q, want api or batch", name, m.GetLabel(), k)
			}
			kernels[k]++
			if typ == dto.MetricType_HISTOGRAM {
				hg := m.GetHistogram()
				if n := len(hg.GetBucket()); n < 2 {
					t.Errorf("family %s: series %v: %d buckets", name, m.GetLabel(), n)
				}
			}
		}
		want := 2
		if strings.HasPrefix(name, "ax_store_") {
			want = 1
		}
		if len(kernels) != want || kernels["api"] == 0 {
			t.Errorf("family %s: series per kernel %v, want %d kernels", name, kernels, want)
		}
	}
	for _, c := range []struct {
		fam, kernel, prio string
		want              float64
	}{
		{"ax_tasks_succeeded_total", "api", "normal", 1},
		{"ax_tasks_failed_total", "batch", "low", 1},
		{"ax_tasks_failed_total", "api", "low", 0},
		{"ax_task_exec_seconds", "api", "normal", 1},
	} {
		if got, ok := value(fams[c.fam], c.kernel, c.prio); !ok || got != c.want {
			t.Errorf("%s{kernel=%q,priority=%q} = %g (found %v), want %g", c.fam, c.kernel, c.prio, got, ok, c.want)
		}
	}

	// Two kernels' own outputs, one after the other, repeat every family: the
	// parser refuses that page, which is why kernels on one page share a set.
	buf.Reset()
	api.WritePrometheus(&buf)
	batch.WritePrometheus(&buf)
	p = expfmt.NewTextParser(model.LegacyValidation)
	if _, err := p.TextToMetricFamilies(&buf); err == nil {
		t.Errorf("TextToMetricFamilies(two WritePrometheus outputs) = nil, want an error for the repeated families")
	}
}

// newPromKernel starts a kernel closed at the end of the test.
func newPromKernel(t *testing.T, cfg kernel.Config) *kernel.Kernel {
	t.Helper()
	k, err := kernel.New(cfg)
	if err != nil {
		t.Fatalf("kernel.New() = %v", err)
	}
	t.Cleanup(func() { _ = k.Close() })
	return k
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// value returns the counter's value, or the histogram's count, of the series of f
// with the given kernel and priority labels.
func value(f *dto.MetricFamily, kernelName, prio string) (float64, bool) {
	for _, m := range f.GetMetric() {
		if label(m, "kernel") != kernelName || label(m, "priority") != prio {
			continue
		}
		if h := m.GetHistogram(); h != nil {
			return float64(h.GetSampleCount()), true
		}
		return m.GetCounter().GetValue(), true
	}
	return 0, false
}
