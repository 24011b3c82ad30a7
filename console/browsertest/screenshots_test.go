package browsertest

import (
	"bytes"
	"context"
	"errors"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/axsched/ax/console"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/schedule"
	"github.com/chromedp/chromedp"
)

// screenshotDir is where -screenshots writes the pages' screenshots, which
// docs/console.md shows.
const screenshotDir = "../../docs/console"

// shoot captures the tab's viewport, checks it is a 1200 × 800 PNG, and writes
// it to screenshotDir/name.png under -screenshots.
func shoot(t *testing.T, tb *tab, name string) {
	t.Helper()
	b, err := chromedp.Run(tb.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot of %s: %v", name, err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(b))
	if err != nil || cfg.Width != 1200 || cfg.Height != 800 {
		t.Fatalf("screenshot of %s: %d × %d, %v; want a 1200 × 800 PNG", name, cfg.Width, cfg.Height, err)
	}
	if !*screenshots {
		return
	}
	path := filepath.Join(screenshotDir, name+".png")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d KiB)", path, len(b)/1024)
}

// Each page of a console on a kernel at work, captured in the browser: the
// overview with its charts, a paused group, schedules, a zombie, durable tasks
// and a dead letter.
func TestScreenshots(t *testing.T) {
	release := make(chan struct{})
	e := setup(t, kernel.Config{
		Owner: "api-1", MaxConcurrency: 8, ZombieGrace: time.Millisecond,
		Groups: map[string]kernel.GroupConfig{
			"upstream": {PerKey: kernel.Limits{Concurrency: 2}},
			"mail":     {Total: kernel.Limits{Concurrency: 4}},
		},
	}, console.Options{Actions: true, Interval: 100 * time.Millisecond, History: 30}, func(k *kernel.Kernel) {
		if err := k.Register("report.build", func(context.Context, []byte) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if err := k.Register("invoice.send", func(_ context.Context, p []byte) error {
			if bytes.Contains(p, []byte("bounce@")) {
				return errors.New("smtp: 451 4.7.1 greylisted, try again later")
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
	t.Cleanup(func() { close(release) }) // before the kernel closes: the zombie ends
	// A second replica on the same table, with tasks queued behind a paused priority.
	st2, err := mysqlstore.Open(testDSN(), mysqlstore.Options{Table: e.table})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st2.Close() })
	k2, err := kernel.New(kernel.Config{Store: st2, Owner: "api-2", Lease: replicaLease})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k2.Close() })
	if err := k2.Pause(kernel.Selector{Priority: kernel.Low}); err != nil {
		t.Fatal(err)
	}
	for range 7 {
		if _, err := k2.TrySubmit(kernel.Task{Priority: kernel.Low, Run: func(context.Context) error { return nil }}); err != nil {
			t.Fatal(err)
		}
	}
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		ny = time.UTC
	}
	nightly, err := schedule.ParseCron("30 2 * * *", ny)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.AddDurable(nightly, "report.build", nil, &schedule.Options{Name: "nightly-report"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Add(schedule.Every(time.Minute), func(context.Context, schedule.Fire) error { return nil }, &schedule.Options{Name: "cache-warm"}); err != nil {
		t.Fatal(err)
	}
	ledger, err := e.s.Add(schedule.Every(15*time.Minute), func(context.Context, schedule.Fire) error {
		return errors.New("ledger-sync: upstream answered 503 Service Unavailable")
	}, &schedule.Options{Name: "ledger-sync", Retry: &kernel.RetryPolicy{MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	audit, err := e.s.Add(schedule.Every(time.Hour), func(context.Context, schedule.Fire) error { return nil }, &schedule.Options{Name: "audit-export"})
	if err != nil {
		t.Fatal(err)
	}
	if err := audit.Pause(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.k.TrySubmit(kernel.Task{
		ID: "fetch-42", Timeout: time.Millisecond, Retry: &kernel.RetryPolicy{MaxAttempts: 1},
		Run: func(context.Context) error {
			<-release
			return nil
		},
	}); err != nil {
		t.Fatal(err)
	}
	if err := e.k.Pause(kernel.Selector{Group: "mail"}); err != nil {
		t.Fatal(err)
	}
	// Durable tasks: sent invoices, dead letters, and some waiting in the paused group.
	ctx := context.Background()
	var dead *kernel.Handle
	for i := range 12 {
		to := "ada@example.com"
		if i%4 == 2 {
			to = "bounce@example.com"
		}
		dt := kernel.DurableTask{Kind: "invoice.send", Payload: []byte(`{"invoice":` + strconv.Itoa(1000+i) + `,"to":"` + to + `"}`), MaxAttempts: 3}
		if i%4 == 3 {
			dt.Group, dt.Key = "mail", "customer-"+strconv.Itoa(i)
		}
		h, err := e.k.SubmitDurable(ctx, dt)
		if err != nil {
			t.Fatal(err)
		}
		if i%4 != 3 {
			if err := h.Wait(ctx); err != nil && dead == nil {
				dead = h
			}
		}
	}
	if dead == nil {
		t.Fatal("no dead letter among the invoices")
	}

	// A steady load: tasks of each priority and group, a few failing, while the
	// console samples enough points for its charts.
	stop := make(chan struct{})
	loaded := make(chan struct{})
	go func() {
		defer close(loaded)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			task := kernel.Task{
				Priority: []kernel.Priority{kernel.High, kernel.Normal, kernel.Normal, kernel.Low}[i%4],
				Retry:    &kernel.RetryPolicy{MaxAttempts: 1},
				Run: func(context.Context) error {
					if i%17 == 0 {
						return context.DeadlineExceeded
					}
					return nil
				},
			}
			switch i % 5 {
			case 1:
				task.Group, task.Key = "upstream", "api-"+strconv.Itoa(i%3)
			case 2:
				task.Group = "mail"
			}
			_, _ = e.k.TrySubmit(task)
		}
	}()
	tb := newTab(t)
	tb.run(t, "the overview with its charts", chromedp.Navigate(e.url),
		poll(`document.querySelectorAll('#charts svg').length >= 2`),
		chromedp.Evaluate[chromedp.Void](`window.history.replaceState(null, '', location.pathname)`))
	tb.run(t, "thirty samples", poll(`fetch('api/v1/overview').then(r => r.json()).then(d => d.samples.length >= 30)`))
	close(stop)
	<-loaded
	tb.run(t, "the overview refreshed", chromedp.Reload(), chromedp.WaitVisible(`#charts polyline`),
		replicaRow("api-2", `c[8] === '0 / 0 / 7'`))
	shoot(t, tb, "overview")

	tb.run(t, "the groups", chromedp.Navigate(e.url+"groups"), chromedp.WaitVisible(`#groups`))
	shoot(t, tb, "groups")

	if err := e.s.Entry("cache-warm").Trigger(); err != nil {
		t.Fatal(err)
	}
	if err := ledger.Trigger(); err != nil {
		t.Fatal(err)
	}
	tb.run(t, "the schedules", chromedp.Navigate(e.url+"schedules"),
		scheduleCell("cache-warm", `c[3].startsWith('succeeded ')`),
		scheduleCell("ledger-sync", `c[3].startsWith('failed ') && c[3].includes('503')`))
	shoot(t, tb, "schedules")

	tb.run(t, "the zombies", chromedp.Navigate(e.url+"zombies"), chromedp.WaitVisible(`article.zombie pre`))
	shoot(t, tb, "zombies")

	tb.run(t, "the tasks", chromedp.Navigate(e.url+"tasks"), taskState(dead.ID(), "failed"), chromedp.Reload(),
		poll(taskRow(dead.ID())+` !== undefined`))
	shoot(t, tb, "tasks")
	tb.submit(t, "a dead letter's page", http.StatusOK, click(`//table[@id="tasks"]//a[text()=`+xpathString(dead.ID())+`]`))
	shoot(t, tb, "task")
	tb.noDialogs(t)
}
