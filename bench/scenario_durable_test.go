package bench

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/storekit"
)

func TestDurableOnMemoryStore(t *testing.T) {
	f, ok := NewRegistry().Executor("ax-memstore")
	if !ok {
		t.Fatal("NewRegistry() has no ax-memstore")
	}
	const n = 3000
	p := Params{N: n, Conc: 8}.resolve(durableScenario().Defaults)
	s, err := runDurable(t.Context(), f, p)
	if err != nil {
		t.Fatalf("runDurable() error = %v", err)
	}
	m := s.Metrics
	if m["lost"] != 0 {
		t.Errorf("lost = %v, want 0 (notes %v)", m["lost"], s.Notes)
	}
	for _, sh := range []string{"bulk", "callers"} {
		get := func(name string) float64 {
			t.Helper()
			v, ok := m[name+"_"+sh]
			if !ok {
				t.Fatalf("no metric %s_%s in %v", name, sh, m)
			}
			return v
		}
		for _, name := range []string{"acked", "executed", "stored"} {
			if v := get(name); v != n {
				t.Errorf("%s_%s = %v, want %d", name, sh, v, n)
			}
		}
		if v := get("lost"); v != 0 {
			t.Errorf("lost_%s = %v, want 0", sh, v)
		}
		if v := get("tasks_per_sec"); v <= 0 {
			t.Errorf("tasks_per_sec_%s = %v, want > 0", sh, v)
		}
		if p50, p99 := get("ack_p50_us"), get("ack_p99_us"); p50 <= 0 || p50 > p99 {
			t.Errorf("ack p50, p99 _%s = %v, %v µs, want 0 < p50 <= p99", sh, p50, p99)
		}
		// Each task is an insert, a start and a success: 3 changes, in at least one commit.
		if c, r := get("commits"), get("rows_per_commit"); c < 1 || r < 1 || c*r != 3*n {
			t.Errorf("commits_%s = %v, rows_per_commit = %v, want changes = 3 × %d", sh, c, r, n)
		}
		if v := get("store_busy_pct"); v <= 0 || v > 100 {
			t.Errorf("store_busy_pct_%s = %v, want in (0, 100]", sh, v)
		}
		if el, sub := get("elapsed_ms"), get("submit_ms"); sub > el {
			t.Errorf("submit_ms_%s = %v > elapsed_ms %v", sh, sub, el)
		}
	}
	if m["peak_heap_mb"] <= 0 || m["peak_goroutines"] <= 0 {
		t.Errorf("peak_heap_mb, peak_goroutines = %v, %v, want > 0", m["peak_heap_mb"], m["peak_goroutines"])
	}
}

// TestDurableCountsWithSucceeded checks the fast path of a store that counts
// its succeeded tasks itself, and that a miscount shows as lost.
func TestDurableCountsWithSucceeded(t *testing.T) {
	tests := []struct {
		name     string
		skew     int // added to the true count
		wantLost float64
	}{
		{"exact", 0, 0},
		{"one missing", -1, 2}, // one per shape
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := Factory{Name: "counting", Mode: Blocking, Durable: func(context.Context, Params) (*DurableSetup, error) {
				ms := storekit.NewMemoryStore()
				var ids []string
				setup := &DurableSetup{Store: &recordingStore{MemoryStore: ms, mu: new(sync.Mutex), ids: &ids}}
				setup.Succeeded = func(ctx context.Context) (int, error) {
					n := 0
					for _, id := range ids {
						if st, err := ms.Get(ctx, id); err == nil && st.State == kernel.Succeeded {
							n++
						}
					}
					return n + tt.skew, nil
				}
				return setup, nil
			}}
			p := Params{N: 500, Conc: 4}.resolve(durableScenario().Defaults)
			s, err := runDurable(t.Context(), f, p)
			if err != nil {
				t.Fatalf("runDurable() error = %v", err)
			}
			if s.Metrics["lost"] != tt.wantLost {
				t.Errorf("lost = %v, want %v (notes %v)", s.Metrics["lost"], tt.wantLost, s.Notes)
			}
		})
	}
}

// recordingStore remembers the IDs it was asked to insert.
type recordingStore struct {
	*storekit.MemoryStore
	mu  *sync.Mutex
	ids *[]string // guarded by mu: the journal may have commits in flight at once
}

func (s *recordingStore) record(changes []store.Change) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range changes {
		if c.Op == store.OpInsert {
			*s.ids = append(*s.ids, c.Task.ID)
		}
	}
}

func (s *recordingStore) Commit(ctx context.Context, changes []store.Change) ([]error, error) {
	s.record(changes)
	return s.MemoryStore.Commit(ctx, changes)
}

func (s *recordingStore) CommitAs(ctx context.Context, o store.Owner, changes []store.Change) ([]error, error) {
	s.record(changes)
	return s.MemoryStore.CommitAs(ctx, o, changes)
}

func TestDurableStoreErrorFailsTheRun(t *testing.T) {
	errDown := errors.New("no database here")
	f := Factory{Name: "down", Mode: Blocking, Durable: func(context.Context, Params) (*DurableSetup, error) {
		return nil, errDown
	}}
	_, err := runDurable(t.Context(), f, Params{N: 10}.resolve(durableScenario().Defaults))
	if !errors.Is(err, errDown) || !strings.Contains(err.Error(), "down") {
		t.Errorf("runDurable() error = %v, want one naming the executor and wrapping %v", err, errDown)
	}
}

func TestDurableScenarioRunsOnDurableConfigurationsOnly(t *testing.T) {
	plans, err := NewPlan(NewRegistry(), Options{Scenarios: []string{"noop", "durable"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, pl := range plans {
		for _, f := range pl.Executors {
			if (pl.Scenario.Name == "durable") != (f.Durable != nil) {
				t.Errorf("%s plans executor %s (durable %v)", pl.Scenario.Name, f.Name, f.Durable != nil)
			}
		}
		if len(pl.Executors) == 0 {
			t.Errorf("%s plans no executor", pl.Scenario.Name)
		}
	}
	if plans[1].Params.N != 100_000 {
		t.Errorf("durable N = %d, want 100,000 by default", plans[1].Params.N)
	}
}

func TestRegistryAddWantsNewOrDurable(t *testing.T) {
	newEx := func(context.Context, Params) (Executor, error) { return nil, nil }
	newDur := func(context.Context, Params) (*DurableSetup, error) { return nil, nil }
	tests := []struct {
		name string
		f    Factory
		ok   bool
	}{
		{"executor", Factory{Name: "e", Mode: Blocking, New: newEx}, true},
		{"durable", Factory{Name: "d", Mode: Blocking, Durable: newDur}, true},
		{"both", Factory{Name: "b", Mode: Blocking, New: newEx, Durable: newDur}, false},
		{"neither", Factory{Name: "n", Mode: Blocking}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := (&Registry{}).Add(tt.f)
			if (err == nil) != tt.ok {
				t.Errorf("Add(%s) = %v, want ok %v", tt.name, err, tt.ok)
			}
		})
	}
}

// fakePeer is a DurablePeer that runs every job at Drain and may lose some.
type fakePeer struct {
	acked, ran, done atomic.Int64
	lose             int64 // jobs Drain leaves without a stored completion
}

func (p *fakePeer) SubmitMany(_ context.Context, payloads [][]byte) error {
	p.acked.Add(int64(len(payloads)))
	return nil
}

func (p *fakePeer) Submit(context.Context, []byte) error {
	p.acked.Add(1)
	return nil
}

func (p *fakePeer) Drain(context.Context) error {
	p.ran.Store(p.acked.Load())
	p.done.Store(p.acked.Load() - p.lose)
	return nil
}

func (p *fakePeer) Executed() int64 { return p.ran.Load() }

func TestDurableOnPeer(t *testing.T) {
	tests := []struct {
		name     string
		lose     int64
		wantLost float64
	}{
		{"all stored", 0, 0},
		{"one lost per shape", 1, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := Factory{Name: "peer", Mode: Blocking, Durable: func(context.Context, Params) (*DurableSetup, error) {
				fp := &fakePeer{lose: tt.lose}
				return &DurableSetup{
					Peer: fp, Succeeded: func(context.Context) (int, error) { return int(fp.done.Load()), nil },
					ServerCPU: func() (time.Duration, error) { return 0, nil },
				}, nil
			}}
			s, err := runDurable(t.Context(), f, Params{N: 2500}.resolve(durableScenario().Defaults))
			if err != nil {
				t.Fatalf("runDurable() error = %v", err)
			}
			m := s.Metrics
			if m["lost"] != tt.wantLost || m["acked_bulk"] != 2500 || m["acked_callers"] != 2500 {
				t.Errorf("lost, acked_bulk, acked_callers = %v, %v, %v, want %v, 2500, 2500 (notes %v)",
					m["lost"], m["acked_bulk"], m["acked_callers"], tt.wantLost, s.Notes)
			}
			if m["tasks_per_sec_bulk"] <= 0 || m["ack_p99_us_callers"] <= 0 {
				t.Errorf("tasks_per_sec_bulk, ack_p99_us_callers = %v, %v, want > 0", m["tasks_per_sec_bulk"], m["ack_p99_us_callers"])
			}
			for _, name := range []string{"client_cpu_us_per_task_bulk", "server_cpu_us_per_task_callers"} {
				if v, ok := m[name]; !ok || v < 0 {
					t.Errorf("%s = %v (present %v), want >= 0", name, v, ok)
				}
			}
			if _, ok := m["rows_per_commit_bulk"]; ok {
				t.Error("a peer reports rows_per_commit_bulk, which only ax's journal knows")
			}
		})
	}
}

func TestPerTaskMicros(t *testing.T) {
	tests := []struct {
		cpu    time.Duration
		n      int
		want   float64
		wantOK bool
	}{
		{3 * time.Second, 20_000, 150, true},
		{1500 * time.Nanosecond, 1, 1.5, true},
		{0, 10, 0, true},
		{time.Second, 0, 0, false},
		{-1, 10, 0, false},
	}
	for _, tt := range tests {
		got, ok := perTaskMicros(tt.cpu, tt.n)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("perTaskMicros(%v, %d) = %v, %v, want %v, %v", tt.cpu, tt.n, got, ok, tt.want, tt.wantOK)
		}
	}
}

// TestCPUMeter checks the server's CPU per task and share of a core from two
// readings, and that a server whose CPU cannot be read, or goes backwards,
// gets a note and no figure.
func TestCPUMeter(t *testing.T) {
	readings := func(ds ...time.Duration) func() (time.Duration, error) {
		i := 0
		return func() (time.Duration, error) {
			d := ds[i]
			i++
			return d, nil
		}
	}
	unreadable := func() (time.Duration, error) { return 0, errors.New("no process named mariadbd") }
	tests := []struct {
		name     string
		server   func() (time.Duration, error)
		wantUS   float64 // server_cpu_us_per_task_bulk; 0: absent
		wantPct  float64
		wantNote string
	}{
		{"read", readings(5*time.Second, 7*time.Second), 1000, 50, ""},
		{"no server", nil, 0, 0, ""},
		{"unreadable", unreadable, 0, 0, "server CPU not measured: no process named mariadbd"},
		{"backwards", readings(7*time.Second, 5*time.Second), 0, 0, "server CPU not measured: its CPU time fell from 7s to 5s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := newSample()
			startCPU(tt.server).put(out, "_bulk", 2000, 4*time.Second)
			m := out.Metrics
			if v, ok := m["client_cpu_us_per_task_bulk"]; processCPU() >= 0 && (!ok || v < 0) {
				t.Errorf("client_cpu_us_per_task_bulk = %v (present %v), want >= 0 (notes %v)", v, ok, out.Notes)
			}
			us, ok := m["server_cpu_us_per_task_bulk"]
			if tt.wantUS == 0 {
				if ok {
					t.Errorf("server_cpu_us_per_task_bulk = %v, want none", us)
				}
			} else if us != tt.wantUS || m["server_cpu_pct_bulk"] != tt.wantPct {
				t.Errorf("server_cpu_us_per_task_bulk, server_cpu_pct_bulk = %v, %v, want %v, %v", us, m["server_cpu_pct_bulk"], tt.wantUS, tt.wantPct)
			}
			notes := strings.Join(out.Notes, "\n")
			if (tt.wantNote == "") != (notes == "") || !strings.Contains(notes, tt.wantNote) {
				t.Errorf("notes = %q, want %q", notes, tt.wantNote)
			}
		})
	}
}
