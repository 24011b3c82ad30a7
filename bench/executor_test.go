package bench_test

import (
	"testing"

	"github.com/axsched/ax/bench"
	"github.com/axsched/ax/bench/benchtest"
)

func TestExecutorsRunEveryAcceptedTask(t *testing.T) {
	for _, f := range bench.NewRegistry().Executors() {
		if f.New == nil {
			continue // a durable configuration: the durable scenario's test covers it
		}
		t.Run(f.Name, func(t *testing.T) { benchtest.Exercise(t, f) })
	}
}
