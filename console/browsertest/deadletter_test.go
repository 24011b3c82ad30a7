package browsertest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax/console"
	"github.com/axsched/ax/internal/axtest"
	"github.com/axsched/ax/kernel"
	"github.com/chromedp/chromedp"
)

// taskState waits until api/v1/tasks/{id} reports the task in state: the
// store's view, which the pages show.
func taskState(id, state string) chromedp.Action[chromedp.Void] {
	return pollEvery(fmt.Sprintf(`fetch('api/v1/tasks/' + encodeURIComponent(%s)).then(r => r.json()).then(d => d.state === %s)`,
		jsString(id), jsString(state)), 50*time.Millisecond)
}

// taskRow is the JavaScript expression of the Tasks page's row of task id (or
// undefined), as an array of its cells' texts.
func taskRow(id string) string {
	return fmt.Sprintf(`[...document.querySelectorAll('#tasks tbody tr')].map(r => [...r.children].map(c => c.textContent)).find(c => c[0] === %s)`, jsString(id))
}

// A durable task that fails its last attempt shows on the Tasks page as a dead
// letter, with its error; the operator clicks Requeue, and the task runs again,
// succeeds, and its page says so.
func TestDeadLetterRequeue(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	ran := make(chan error, 2)
	const errText = "upstream answered 503: service unavailable"
	e := setup(t, kernel.Config{}, console.Options{Actions: true, Interval: 100 * time.Millisecond}, func(k *kernel.Kernel) {
		if err := k.Register("browser.invoice", func(context.Context, []byte) error {
			var err error
			if failing.Load() {
				err = errors.New(errText)
			}
			ran <- err
			return err
		}); err != nil {
			t.Fatal(err)
		}
	})
	ctx := context.Background()
	h, err := e.k.SubmitDurable(ctx, kernel.DurableTask{Kind: "browser.invoice", Payload: []byte(`{"invoice":42}`), MaxAttempts: 1})
	if err != nil {
		t.Fatalf("SubmitDurable: %v", err)
	}
	id := h.ID()
	if err := h.Wait(ctx); err == nil {
		t.Fatal("the failing task succeeded")
	}
	if err := axtest.WaitOrTimeout(t, ran, "the failed attempt"); err == nil {
		t.Fatal("the first attempt reported success")
	}

	tb := newTab(t)
	tb.run(t, "the dead letter in the store", chromedp.Navigate(e.url+"tasks?state=failed"), taskState(id, "failed"), chromedp.Reload(),
		poll(taskRow(id)+` !== undefined`))
	row := eval[[]string](t, tb, taskRow(id))
	if row[1] != "browser.invoice" || row[2] != "failed" || row[6] != "1/1" || row[10] != errText {
		t.Errorf("the dead letter's row = %q, want kind browser.invoice, failed, attempt 1/1, error %q", row, errText)
	}

	// The operator opens the task's page, then requeues it.
	tb.submit(t, "click the task's ID", 200, click(`//table[@id="tasks"]//a[text()=`+xpathString(id)+`]`))
	if got := eval[string](t, tb, `document.querySelector('pre.error').textContent`); got != errText {
		t.Errorf("the task's page shows the error %q, want %q", got, errText)
	}
	failing.Store(false)
	tb.submit(t, "click Requeue", 200, click(`//form[contains(@action, "api/v1/tasks/requeue?id=`+url.QueryEscape(id)+`")]/button`))
	tb.run(t, "the page after the requeue", flashIs("Requeued."))
	if err := axtest.WaitOrTimeout(t, ran, "the requeued attempt"); err != nil {
		t.Fatalf("the requeued attempt failed: %v", err)
	}
	tb.run(t, "the task succeeded", taskState(id, "succeeded"), chromedp.Reload(),
		poll(`[...document.querySelectorAll('table.task tr')].some(r => r.children[0].textContent === 'state' && r.children[1].textContent === 'succeeded')`))
	tb.noDialogs(t)
}
