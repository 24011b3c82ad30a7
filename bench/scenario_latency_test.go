package bench

import (
	"context"
	"testing"
)

// handOverCounter runs every task inline and counts how it was handed over.
type handOverCounter struct {
	gos, prepared int // one generator calls both; read after the run
}

var (
	_ Executor = (*handOverCounter)(nil)
	_ Preparer = (*handOverCounter)(nil)
)

func (c *handOverCounter) Go(f func()) error {
	c.gos++
	f()
	return nil
}

func (c *handOverCounter) Submit(t Task) error               { return t.Run(context.Background()) }
func (c *handOverCounter) Wait()                             {}
func (c *handOverCounter) Close()                            {}
func (c *handOverCounter) Prepare(body func(int), i int) any { return func() { body(i) } }

func (c *handOverCounter) GoPrepared(task any) error {
	c.prepared++
	task.(func())()
	return nil
}

func TestLatencyGenerators(t *testing.T) {
	const n = 500
	tests := []struct {
		name              string
		gen               latencyGen
		wantGo, wantPrepd int
	}{
		{"prepared tasks", genPrepared, 0, n},
		{"fresh closures to Go", genYield, n, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &handOverCounter{}
			f := Factory{Name: "counter", Mode: Blocking, New: func(context.Context, Params) (Executor, error) { return c, nil }}
			s, err := runLatency(t.Context(), f, Params{N: n, Conc: 1, Rate: 50_000}, tt.gen)
			if err != nil {
				t.Fatalf("runLatency() error = %v", err)
			}
			if c.gos != tt.wantGo || c.prepared != tt.wantPrepd {
				t.Errorf("Go called %d times, GoPrepared %d; want %d and %d", c.gos, c.prepared, tt.wantGo, tt.wantPrepd)
			}
			if s.Metrics["executed"] != n || s.Metrics["lost"] != 0 {
				t.Errorf("executed %v, lost %v; want %d and 0", s.Metrics["executed"], s.Metrics["lost"], n)
			}
		})
	}
}
