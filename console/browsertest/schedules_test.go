package browsertest

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/axsched/ax/console"
	"github.com/axsched/ax/internal/axtest"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/schedule"
	"github.com/chromedp/chromedp"
)

// scheduleCell waits until the Schedules page's row of name satisfies the
// JavaScript condition cond on its cells (an array named c, c[0] the name).
func scheduleCell(name, cond string) chromedp.Action[chromedp.Void] {
	return poll(fmt.Sprintf(`(() => {
		const row = [...document.querySelectorAll('#schedules tbody tr')].find(r => r.querySelector('th')?.textContent === %s);
		if (row === undefined) return false;
		const c = [...row.children].map(x => x.textContent);
		return %s;
	})()`, jsString(name), cond))
}

// scheduleButton is the XPath of the button of name's row that posts to action
// ("pause", "resume" or "trigger").
func scheduleButton(name, action string) string {
	return fmt.Sprintf(`//table[@id="schedules"]//tr[th=%s]//form[starts-with(@action, "api/v1/schedules/%s?")]/button`, strconv.Quote(name), action)
}

// The operator triggers a durable schedule from the Schedules page: its
// occurrence runs as a durable task, and the page shows the fire.
func TestScheduleTrigger(t *testing.T) {
	fired := make(chan string, 1)
	e := setup(t, kernel.Config{}, console.Options{Actions: true, Interval: 100 * time.Millisecond}, func(k *kernel.Kernel) {
		if err := k.Register("browser.report", func(ctx context.Context, payload []byte) error {
			name, _, _ := schedule.OccurrenceOf(ctx)
			fired <- name + ":" + string(payload)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := e.s.AddDurable(schedule.Every(time.Hour), "browser.report", []byte("weekly"), &schedule.Options{Name: "nightly-report"}); err != nil {
		t.Fatalf("AddDurable: %v", err)
	}
	tb := newTab(t)
	tb.run(t, "open the Schedules page", chromedp.Navigate(e.url+"schedules"),
		scheduleCell("nightly-report", `c[2] === 'active' && c[6] === '0' && c[5] === '–' && c[3] === '–'`))

	tb.submit(t, "click Trigger of nightly-report", 200, click(scheduleButton("nightly-report", "trigger")))
	tb.run(t, "the page after the trigger", flashIs("Schedule triggered."))
	if got := axtest.WaitOrTimeout(t, fired, "the triggered occurrence"); got != "nightly-report:weekly" {
		t.Fatalf("the occurrence ran as %q, want nightly-report:weekly", got)
	}
	// The page refreshes itself: one fire, its time, and its outcome: a durable
	// occurrence is submitted to the store.
	tb.run(t, "the fire on the page",
		scheduleCell("nightly-report", `c[2] === 'active' && c[6] === '1' && c[5] !== '–' && c[3].startsWith('submitted ')`))
	tb.run(t, "the occurrence's task linked from its outcome",
		poll(`(() => { const a = [...document.querySelectorAll('#schedules td.outcome a')].find(a => a.textContent === 'submitted'); return a !== undefined && new URL(a.href).searchParams.get('id').startsWith('sched/nightly-report/'); })()`))

	// Pause and resume from the page too.
	tb.submit(t, "click Pause of nightly-report", 200, click(scheduleButton("nightly-report", "pause")))
	tb.run(t, "the paused schedule", flashIs("Schedule paused."), scheduleCell("nightly-report", `c[2] === 'paused' && c[4] === '–'`))
	if st := e.s.Stats()["nightly-report"]; !st.Paused {
		t.Errorf("Stats()[nightly-report] = %+v after Pause, want Paused", st)
	}
	tb.submit(t, "click Resume of nightly-report", 200, click(scheduleButton("nightly-report", "resume")))
	tb.run(t, "the resumed schedule", flashIs("Schedule resumed."), scheduleCell("nightly-report", `c[2] === 'active' && c[4] !== '–'`))
	tb.noDialogs(t)
}
