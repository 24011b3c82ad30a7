package browsertest

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/axsched/ax/console"
	"github.com/axsched/ax/internal/axtest"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/schedule"
	"github.com/chromedp/chromedp"
)

// hostile are strings a task or a user may bring: markup, an attribute breaker
// with an event handler, a textarea's end, a JavaScript URL, a quote breaker,
// and invalid UTF-8 (one bad byte, and a run of two).
var hostile = []string{
	`<script>alert(1)</script>`,
	`"><img src=x onerror=alert(1)>`,
	`</textarea>`,
	`</textarea><script>alert(3)</script>`,
	`javascript:alert(1)`,
	`'-alert(5)-'`,
	"bad\xffutf8<b>x</b>",
	"two\xfe\xffbad",
}

// asText is s as the console shows it, in its pages and in JSON: s itself, with
// U+FFFD for each byte of invalid UTF-8 (encoding/json's rule).
func asText(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		if r == utf8.RuneError && n == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[:n])
		}
		s = s[n:]
	}
	return b.String()
}

// wantAll fails the test unless got holds asText of each of strs and nothing else.
func wantAll(t *testing.T, where string, got []string, strs []string) {
	t.Helper()
	want := make([]string, len(strs))
	for i, s := range strs {
		want[i] = asText(s)
	}
	slices.Sort(want)
	got = slices.Sorted(slices.Values(got))
	if !slices.Equal(got, want) {
		t.Errorf("%s = %q, want %q", where, got, want)
	}
}

// noInjection fails the test if the page holds an element that hostile markup
// would have made: a second script, an image, a textarea.
func noInjection(t *testing.T, tb *tab, page string) {
	t.Helper()
	got := eval[string](t, tb, `[document.scripts.length, document.images.length, document.querySelectorAll('textarea, b').length].join(' ')`)
	if got != "1 0 0" {
		t.Errorf("%s: scripts, images, textareas and b elements = %s, want 1 0 0", page, got)
	}
}

// Task IDs, schedule names and error texts holding markup, JavaScript and
// invalid UTF-8 show as text in the browser: no dialog opens, no element is
// made, the DOM's text is the string itself (U+FFFD for each bad byte), the JSON
// API returns it intact, and the pages' forms carry it back intact.
func TestHostileStrings(t *testing.T) {
	release := make(chan struct{})
	fired := make(chan string, len(hostile))
	e := setup(t, kernel.Config{MaxConcurrency: len(hostile) + 1, ZombieGrace: time.Millisecond}, console.Options{
		Actions:  true,
		Interval: 100 * time.Millisecond,
		// An error text of the test's choosing: the hostile string ?deny= names.
		Authorize: func(r *http.Request, _ string) error {
			if i, err := strconv.Atoi(r.URL.Query().Get("deny")); err == nil {
				return errors.New(hostile[i])
			}
			return nil
		},
	}, nil)
	t.Cleanup(func() { close(release) }) // before the kernel closes: its zombies end
	for _, s := range hostile {
		// A zombie whose task ID is s: it outlives its timeout until the test ends.
		if _, err := e.k.TrySubmit(kernel.Task{
			ID: s, Timeout: time.Millisecond, Retry: &kernel.RetryPolicy{MaxAttempts: 1},
			Run: func(context.Context) error {
				<-release
				return nil
			},
		}); err != nil {
			t.Fatalf("TrySubmit(ID %q) = %v", s, err)
		}
		// A schedule named s.
		if _, err := e.s.Add(schedule.Every(time.Hour), func(context.Context, schedule.Fire) error {
			fired <- s
			return nil
		}, &schedule.Options{Name: s}); err != nil {
			t.Fatalf("Add(Name %q) = %v", s, err)
		}
	}
	tb := newTab(t)

	// Zombies: each task ID as a heading, with its stack once it outlived the grace.
	tb.run(t, "the zombies with their stacks", chromedp.Navigate(e.url+"zombies"),
		poll(`document.querySelectorAll('article.zombie').length === `+strconv.Itoa(len(hostile))+
			` && [...document.querySelectorAll('article.zombie')].every(a => a.querySelector('pre') !== null)`))
	wantAll(t, "the zombies' IDs in the DOM", eval[[]string](t, tb, `[...document.querySelectorAll('article.zombie h2')].map(h => h.textContent)`), hostile)
	noInjection(t, tb, "zombies")
	wantAll(t, "the zombies' IDs in api/v1/zombies", eval[[]string](t, tb, `fetch('api/v1/zombies').then(r => r.json()).then(d => d.zombies.map(z => z.task_id))`), hostile)

	// Schedules: each name in its row, and in the URL of its forms.
	tb.run(t, "the schedules", chromedp.Navigate(e.url+"schedules"),
		poll(`document.querySelectorAll('#schedules tbody tr').length === `+strconv.Itoa(len(hostile))))
	wantAll(t, "the schedules' names in the DOM", eval[[]string](t, tb, `[...document.querySelectorAll('#schedules tbody th')].map(h => h.textContent)`), hostile)
	wantAll(t, "the schedules' trigger forms' names", eval[[]string](t, tb, `[...document.querySelectorAll('form[action^="api/v1/schedules/trigger?"]')].map(f => new URL(f.action).searchParams.get('name'))`), hostile)
	noInjection(t, tb, "schedules")
	wantAll(t, "the schedules' names in api/v1/schedules", eval[[]string](t, tb, `fetch('api/v1/schedules').then(r => r.json()).then(d => d.schedules.map(s => s.name))`), hostile)

	// The forms carry the names back intact, in their URL: Trigger in a row fires
	// the schedule of that name, bytes that are not UTF-8 included.
	for _, s := range hostile {
		tb.submit(t, "click Trigger of "+strconv.Quote(s), http.StatusOK,
			click(`//table[@id="schedules"]//tr[th=`+xpathString(asText(s))+`]//form[starts-with(@action, "api/v1/schedules/trigger?")]/button`))
		tb.run(t, "the page after the trigger", flashIs("Schedule triggered."))
		if got := axtest.WaitOrTimeout(t, fired, "the triggered fire"); got != s {
			t.Fatalf("Trigger in the row of %q fired %q", s, got)
		}
	}

	// Error texts: Authorize refuses with each string as its error.
	for i, s := range hostile {
		res, err := chromedp.Run(tb.ctx, chromedp.NavigateResponse(e.url+"groups?deny="+strconv.Itoa(i)))
		if err != nil {
			t.Fatalf("open a refused page: %v", err)
		}
		if res.Status != http.StatusForbidden {
			t.Errorf("refused page: status %d, want 403", res.Status)
		}
		if got := eval[string](t, tb, `document.getElementById('error').textContent`); got != asText(s) {
			t.Errorf("the refusal's text in the DOM = %q, want %q", got, asText(s))
		}
		noInjection(t, tb, "error")
		if got := eval[string](t, tb, `fetch('api/v1/groups?deny=`+strconv.Itoa(i)+`').then(r => r.json()).then(d => d.error)`); got != asText(s) {
			t.Errorf("the refusal's text in JSON = %q, want %q", got, asText(s))
		}
	}
	tb.noDialogs(t)
}

// xpathString is s as an XPath 1.0 string literal (which has no escapes: a string
// holding both quote characters is a concat of pieces).
func xpathString(s string) string {
	if !strings.Contains(s, `"`) {
		return `"` + s + `"`
	}
	if !strings.Contains(s, `'`) {
		return `'` + s + `'`
	}
	parts := strings.Split(s, `"`)
	for i, p := range parts {
		parts[i] = `"` + p + `"`
	}
	return "concat(" + strings.Join(parts, `, '"', `) + ")"
}

// Durable tasks whose kinds, keys and error texts hold the hostile strings show
// on the Tasks page as text, and api/v1/tasks returns them intact.
func TestHostileTasks(t *testing.T) {
	e := setup(t, kernel.Config{Groups: map[string]kernel.GroupConfig{"upstream": {}}},
		console.Options{Actions: true, Interval: 100 * time.Millisecond}, func(k *kernel.Kernel) {
			for _, s := range hostile {
				if err := k.Register(s, func(context.Context, []byte) error { return errors.New(s) }); err != nil {
					t.Fatalf("Register(%q) = %v", s, err)
				}
			}
		})
	ctx := context.Background()
	var hs []*kernel.Handle
	for _, s := range hostile {
		h, err := e.k.SubmitDurable(ctx, kernel.DurableTask{Kind: s, Group: "upstream", Key: s, MaxAttempts: 1})
		if err != nil {
			t.Fatalf("SubmitDurable(Kind, Key %q) = %v", s, err)
		}
		hs = append(hs, h)
	}
	for _, h := range hs {
		if err := h.Wait(ctx); err == nil {
			t.Fatalf("task %s succeeded, want its error", h.ID())
		}
	}
	tb := newTab(t)
	n := strconv.Itoa(len(hostile))
	// The store commits the dead letters after the attempts end: wait for them.
	tb.run(t, "the dead letters in the store", chromedp.Navigate(e.url+"tasks?state=failed"),
		pollEvery(`fetch('api/v1/tasks?state=failed').then(r => r.json()).then(d => d.tasks.length === `+n+`)`, 50*time.Millisecond),
		chromedp.Reload(), poll(`document.querySelectorAll('#tasks tbody tr').length === `+n))
	col := func(i int) []string {
		return eval[[]string](t, tb, `[...document.querySelectorAll('#tasks tbody tr')].map(r => r.children[`+strconv.Itoa(i)+`].textContent)`)
	}
	wantAll(t, "the kinds in the DOM", col(1), hostile)
	wantAll(t, "the keys in the DOM", col(5), hostile)
	wantAll(t, "the errors in the DOM", col(10), hostile)
	noInjection(t, tb, "tasks")
	api := func(field string) []string {
		return eval[[]string](t, tb, `fetch('api/v1/tasks?state=failed').then(r => r.json()).then(d => d.tasks.map(x => x.`+field+`))`)
	}
	wantAll(t, "the kinds in api/v1/tasks", api("kind"), hostile)
	wantAll(t, "the keys in api/v1/tasks", api("key"), hostile)
	wantAll(t, "the errors in api/v1/tasks", api("last_error"), hostile)

	// A task's own page, through its link.
	id := hs[1].ID()
	tb.submit(t, "click a task's ID", http.StatusOK, click(`//table[@id="tasks"]//a[text()=`+xpathString(id)+`]`))
	if got := eval[string](t, tb, `document.querySelector('pre.error').textContent`); got != asText(hostile[1]) {
		t.Errorf("the task's page shows the error %q, want %q", got, asText(hostile[1]))
	}
	noInjection(t, tb, "task")
	tb.noDialogs(t)
}
