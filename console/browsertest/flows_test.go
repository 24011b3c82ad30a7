package browsertest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax/console"
	"github.com/axsched/ax/flow"
	"github.com/axsched/ax/internal/axtest"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/mysqlstore"
	"github.com/chromedp/chromedp"
)

// runState is the JavaScript expression of the state a run's page shows.
const runState = `[...document.querySelectorAll('#run table.task tr')].find(r => r.children[0].textContent === 'state')?.children[1].textContent`

// stageRows is the JavaScript expression of a run's page's stages, each
// "name state shards".
const stageRows = `[...document.querySelectorAll('#stages tr.stage')].map(r => [...r.children].slice(0, 4).map(c => c.textContent).filter((_, i) => i !== 2).join(' '))`

// A durable flow on MariaDB whose shard 2 fails shows on the Flows page as a
// failed run; the operator opens it, sees its stages in order with the shards
// done, clicks Retry on the failed stage, and the page, refreshing itself,
// shows the run succeed. A second run, held in its first stage, is canceled
// with its Cancel button and its page shows it canceled.
func TestFlowRetryAndCancel(t *testing.T) {
	var healthy, hold atomic.Bool
	held := make(chan struct{}, 1)
	var d *flow.Durable
	e := setupWith(t, kernel.Config{}, console.Options{Actions: true, Interval: 100 * time.Millisecond},
		func(k *kernel.Kernel, st *mysqlstore.Store, o *console.Options) {
			f := flow.New("browser.etl").
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
							return errors.New("bad row 1207: a date in 2031")
						}
						return nil
					}, &flow.ShardOptions{StageOptions: flow.StageOptions{After: []string{"fetch"}, Retry: &kernel.RetryPolicy{MaxAttempts: 1}}}).
				Stage("store", func(context.Context, flow.Inputs) ([]byte, error) { return nil, nil }, &flow.StageOptions{After: []string{"clean"}})
			var err error
			d, err = flow.Register(k, st, f, &flow.DurableOptions{Poll: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = d.Close() })
			o.Flows = map[string]console.FlowRuns{"browser.etl": d}
		})
	ctx, cancel := context.WithTimeout(context.Background(), tabTimeout)
	defer cancel()
	run, err := d.Start(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Wait(ctx, run); err == nil {
		t.Fatal("the run succeeded, want shard 2 to fail it")
	}

	tb := newTab(t)
	row := fmt.Sprintf(`[...document.querySelectorAll('tr.run')].map(r => [...r.children].map(c => c.textContent)).find(c => c[0] === %s)`, jsString(run))
	tb.run(t, "the Flows page", chromedp.Navigate(e.url+"flows"), poll(row+` !== undefined`))
	if cells := eval[[]string](t, tb, row); cells[1] != "failed" || cells[3] != "1/3" || cells[4] != "3/4" {
		t.Errorf("the failed run's row = %q, want failed, 1/3 stages, 3/4 shards", cells)
	}
	tb.submit(t, "click the run's ID", 200, click(`//tr[@class="run"]//a[text()=`+xpathString(run)+`]`))
	if got := strings.Join(eval[[]string](t, tb, stageRows), "|"); got != "fetch succeeded –|clean failed 3/4|store canceled –" {
		t.Errorf("the run's stages = %q, want fetch succeeded, clean failed at 3/4, store canceled (FailFast)", got)
	}
	if got := eval[float64](t, tb, `document.querySelectorAll('#stages tr.stage progress')[1].value`); got != 0.75 {
		t.Errorf("clean's progress bar = %v, want 0.75", got)
	}
	shoot(t, tb, "flow")

	healthy.Store(true)
	tb.submit(t, "click Retry", 200, click(`//form[contains(@action, "api/v1/flows/retry?")]/button`))
	tb.run(t, "the page after the retry", flashIs("Stage retried."))
	if err := d.Wait(ctx, run); err != nil {
		t.Fatalf("the run after the retry: %v", err)
	}
	// The page refreshes its parts on its own, query and all.
	tb.run(t, "the run succeeded", poll(runState+` === 'succeeded'`))
	if got := strings.Join(eval[[]string](t, tb, stageRows), "|"); got != "fetch succeeded –|clean succeeded 4/4|store succeeded –" {
		t.Errorf("the retried run's stages = %q", got)
	}

	hold.Store(true)
	run2, err := d.Start(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	axtest.WaitOrTimeout(t, held, "the second run's fetch")
	tb.run(t, "the second run's page", chromedp.Navigate(e.url+"flow?"+url.Values{"flow": {"browser.etl"}, "id": {run2}}.Encode()),
		poll(runState+` === 'running'`))
	tb.submit(t, "click Cancel run", 200, click(`//form[contains(@action, "api/v1/flows/cancel?")]/button`))
	tb.run(t, "the page after the cancel", flashIs("Run canceled."), poll(runState+` === 'canceled'`))
	if err := d.Wait(ctx, run2); !errors.Is(err, kernel.ErrCanceled) {
		t.Errorf("the second run after the console's cancel: %v, want kernel.ErrCanceled", err)
	}
	tb.noDialogs(t)
}
