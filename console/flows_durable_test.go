package console

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax/flow"
	"github.com/axsched/ax/internal/axtest"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store/storekit"
)

// *flow.Durable is what Options.Flows takes.
var _ FlowRuns = (*flow.Durable)(nil)

// TestDurableFlowThroughConsole steers a real durable flow on a MemoryStore
// through the console: a run whose shard 2 fails shows its stages, shards done
// of total and the error; the console's retry of the failed stage makes it
// succeed; a second run, held in its first stage, is canceled by the console's
// cancel and ends Canceled.
func TestDurableFlowThroughConsole(t *testing.T) {
	st := storekit.NewMemoryStore()
	k, err := kernel.New(kernel.Config{Store: st, Owner: "console-flows", MaxConcurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	var healthy atomic.Bool
	held := make(chan struct{}, 1) // a run's fetch waits here, once told to
	var hold atomic.Bool
	once := &kernel.RetryPolicy{MaxAttempts: 1}
	f := flow.New("etl").
		Stage("fetch", func(ctx context.Context, _ flow.Inputs) ([]byte, error) {
			if hold.Load() {
				held <- struct{}{}
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return []byte("rows"), nil
		}, nil).
		Sharded("clean", func(context.Context, flow.Inputs) (int, error) { return 4, nil },
			func(_ context.Context, s flow.Shard, _ flow.Inputs) error {
				if s.Index == 2 && !healthy.Load() {
					return errors.New("shard 2: <b>bad row</b>")
				}
				return nil
			}, &flow.ShardOptions{StageOptions: flow.StageOptions{After: []string{"fetch"}, Retry: once}}).
		Stage("store", func(context.Context, flow.Inputs) ([]byte, error) { return nil, nil }, &flow.StageOptions{After: []string{"clean"}})
	d, err := flow.Register(k, st, f, &flow.DurableOptions{Poll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Options{Kernel: k, Actions: true, Interval: time.Minute, Flows: map[string]FlowRuns{"etl": d}})
	if err != nil {
		t.Fatal(err)
	}
	c := h.(*console)
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		_ = d.Close()
		_ = k.Close()
		<-c.sm.done
		_ = st.Close()
	})
	b := &bundle{k: k, h: h, c: c, srv: srv}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	run, err := d.Start(ctx, []byte("2030-01-02"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Wait(ctx, run); err == nil {
		t.Fatal("the run succeeded, want its shard 2 to fail it")
	}
	var all flowsData
	b.getJSON(t, "api/v1/flows", &all)
	if len(all.Flows) != 1 || len(all.Flows[0].Runs) != 1 || all.Flows[0].Runs[0].ID != run || all.Flows[0].Runs[0].State != "failed" {
		t.Fatalf("api/v1/flows = %+v, want the failed run %s", all, run)
	}
	var one runData
	b.getJSON(t, "api/v1/flows/run?flow=etl&id="+run, &one)
	if cl := one.Stages[1]; one.State != "failed" || one.Stages[0].State != "succeeded" || cl.Name != "clean" || cl.State != "failed" ||
		cl.Shards != 4 || cl.ShardsDone != 3 || cl.Error == "" || len(cl.Actions) != 1 {
		t.Fatalf("the failed run = %+v, want clean failed at 3 of 4 shards, with its error and retry", one)
	}
	if _, body := b.get(t, "flow?flow=etl&id="+run); !strings.Contains(body, "3/4") || !strings.Contains(body, "&lt;b&gt;bad row&lt;/b&gt;") {
		t.Errorf("the run's page shows no 3/4 or no escaped error")
	}

	// Retry through the console: the shard runs again, healthy, and the run
	// succeeds.
	healthy.Store(true)
	if code, body := b.postJSON(t, "api/v1/flows/retry", map[string]string{"flow": "etl", "id": run, "stage": "clean"}, c.token); code != http.StatusOK {
		t.Fatalf("retry through the console = %d %s", code, body)
	}
	if err := d.Wait(ctx, run); err != nil {
		t.Fatalf("the run after the console's retry: %v", err)
	}
	b.getJSON(t, "api/v1/flows/run?flow=etl&id="+run, &one)
	if one.State != "succeeded" || one.StagesDone != 3 || one.ShardsDone != 4 || one.Progress != 1 {
		t.Errorf("the retried run = %+v, want succeeded, every stage and shard done", one)
	}

	// Cancel through the console: a run held in fetch ends Canceled.
	hold.Store(true)
	run2, err := d.Start(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	axtest.WaitOrTimeout(t, held, "the second run's fetch")
	if code, body := b.postJSON(t, "api/v1/flows/cancel", map[string]string{"flow": "etl", "id": run2}, c.token); code != http.StatusOK {
		t.Fatalf("cancel through the console = %d %s", code, body)
	}
	if err := d.Wait(ctx, run2); !errors.Is(err, kernel.ErrCanceled) {
		t.Fatalf("the run after the console's cancel: %v, want kernel.ErrCanceled", err)
	}
	b.getJSON(t, "api/v1/flows/run?flow=etl&id="+run2, &one)
	if one.State != "canceled" || one.Actions != nil {
		t.Errorf("the canceled run = %+v", one)
	}
	if code, _ := b.get(t, "api/v1/flows/run?flow=etl&id=no-such-run"); code != http.StatusNotFound {
		t.Errorf("an unknown run of a durable flow = %d, want 404 (flow.ErrUnknownRun)", code)
	}
}
