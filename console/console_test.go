package console

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/internal/axtest"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/schedule"
)

func TestOptionsValidate(t *testing.T) {
	k, err := kernel.New(kernel.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k.Close() }()
	tests := []struct {
		name  string
		o     Options
		field string // "" for a valid Options
	}{
		{"zero but Kernel", Options{Kernel: k}, ""},
		{"full", Options{Kernel: k, Prefix: "/ops/console/", TrustedOrigins: []string{"https://ops.example.com"}, Interval: time.Minute, History: historyMax}, ""},
		{"no kernel", Options{}, "console.Options.Kernel"},
		{"relative prefix", Options{Kernel: k, Prefix: "console"}, "console.Options.Prefix"},
		{"prefix with query", Options{Kernel: k, Prefix: "/c?x"}, "console.Options.Prefix"},
		{"origin with path", Options{Kernel: k, TrustedOrigins: []string{"https://a.example/x"}}, "console.Options.TrustedOrigins[0]"},
		{"origin without scheme", Options{Kernel: k, TrustedOrigins: []string{"a.example"}}, "console.Options.TrustedOrigins[0]"},
		{"short interval", Options{Kernel: k, Interval: time.Millisecond}, "console.Options.Interval"},
		{"long interval", Options{Kernel: k, Interval: time.Hour}, "console.Options.Interval"},
		{"negative history", Options{Kernel: k, History: -1}, "console.Options.History"},
		{"huge history", Options{Kernel: k, History: historyMax + 1}, "console.Options.History"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.o.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var ce *kernel.ConfigError
			if !errors.As(err, &ce) || ce.Field != tt.field {
				t.Fatalf("Validate() = %v, want a *kernel.ConfigError for %s", err, tt.field)
			}
			if h, err := New(tt.o); h != nil || err == nil || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("New() = %v, %v; want nil and the error naming %s", h, err, tt.field)
			}
		})
	}
}

// busyKernel gives b's kernel work to show: succeeded tasks of each priority, a
// zombie with a stack, a task waiting in the group and a schedule that fired.
func busyKernel(t *testing.T, b *bundle, zombieID, scheduleName string) {
	t.Helper()
	for _, p := range []kernel.Priority{kernel.High, kernel.Normal, kernel.Low} {
		h, err := b.k.TrySubmit(kernel.Task{Priority: p, Run: func(context.Context) error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	if _, err := b.k.TrySubmit(kernel.Task{ID: zombieID, Timeout: time.Millisecond, Retry: &kernel.RetryPolicy{MaxAttempts: 1}, Run: func(context.Context) error {
		<-release // ignores its context: a zombie
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	axtest.Eventually(t, func() bool {
		zs := b.k.Zombies()
		return len(zs) == 1 && len(zs[0].Stack) > 0
	}, "a zombie with its stack")
	fired := make(chan struct{}, 1)
	e, err := b.s.Add(schedule.Every(time.Hour), func(context.Context, schedule.Fire) error {
		fired <- struct{}{}
		return nil
	}, &schedule.Options{Name: scheduleName})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Trigger(); err != nil {
		t.Fatal(err)
	}
	axtest.WaitOrTimeout(t, fired, "the schedule's fire")
	axtest.Eventually(t, func() bool { return e.Last().Outcome == schedule.OutcomeSucceeded }, "the schedule's occurrence succeeded")
}

func TestPagesAndAPI(t *testing.T) {
	b := setup(t, Options{Actions: true, Interval: time.Minute})
	busyKernel(t, b, "zombie-task", "nightly-report")
	b.c.sm.take()

	pages := []struct {
		path string
		want []string
	}{
		{"", []string{"<h1>Overview</h1>", "<th>high</th>", "<th>normal</th>", "<th>low</th>", "<polyline", `name="priority" value="high"`}},
		{"groups", []string{"<h1>Groups</h1>", `<th><span class="clip" title="upstream">upstream</span></th>`, `name="group" value="upstream"`, `name="key"`}},
		{"schedules", []string{"<h1>Schedules</h1>", `<th><span class="clip" title="nightly-report">nightly-report</span></th>`, `<code class="clip" title="@every 1h0m0s">@every 1h0m0s</code>`, `<td class="text outcome">succeeded <span class="note">`, `action="api/v1/schedules/trigger?name=nightly-report"`}},
		{"zombies", []string{"<h1>Zombies</h1>", "<h2>zombie-task</h2>", "Attempt 1", "goroutine", "console.busyKernel"}},
	}
	for _, p := range pages {
		code, body := b.get(t, p.path)
		if code != http.StatusOK {
			t.Fatalf("GET /%s = %d, want 200", p.path, code)
		}
		for _, w := range p.want {
			if !strings.Contains(body, w) {
				t.Errorf("GET /%s: no %q in the page", p.path, w)
			}
		}
	}

	var ov overviewData
	b.getJSON(t, "api/v1/overview", &ov)
	if len(ov.Priorities) != 3 || ov.Priorities[0].Priority != "high" || ov.Priorities[0].Totals.Succeeded != 1 {
		t.Errorf("overview priorities = %+v, want high, normal, low with one High success", ov.Priorities)
	}
	if ov.Priorities[1].Totals.TimedOut != 1 || ov.Zombies != 1 || len(ov.Samples) != 2 || ov.IntervalMS != 60_000 {
		t.Errorf("overview: normal timed out %d, zombies %d, %d samples, interval %d ms; want 1, 1, 2, 60000",
			ov.Priorities[1].Totals.TimedOut, ov.Zombies, len(ov.Samples), ov.IntervalMS)
	}
	var gs groupsData
	b.getJSON(t, "api/v1/groups", &gs)
	if len(gs.Groups) != 1 || gs.Groups[0].Name != "upstream" || gs.Groups[0].Paused {
		t.Errorf("groups = %+v, want upstream, running", gs.Groups)
	}
	var ss schedulesData
	b.getJSON(t, "api/v1/schedules", &ss)
	if !ss.Scheduler || len(ss.Schedules) != 1 {
		t.Fatalf("schedules = %+v, want one", ss)
	}
	if s := ss.Schedules[0]; s.Name != "nightly-report" || s.Spec != "@every 1h0m0s" || s.Fires != 1 || s.LastOutcome != "succeeded" || s.LastOutcomeAt.IsZero() || s.LastError != "" || s.Next.IsZero() || s.Last.IsZero() || s.Paused {
		t.Errorf("schedule = %+v, want nightly-report, @every 1h0m0s, one fire succeeded, a next and a last target", s)
	}
	var zs zombiesData
	b.getJSON(t, "api/v1/zombies", &zs)
	if len(zs.Zombies) != 1 || zs.Zombies[0].TaskID != "zombie-task" || zs.Zombies[0].Attempt != 1 || !strings.Contains(zs.Zombies[0].Stack, "goroutine") {
		t.Errorf("zombies = %+v, want zombie-task with its stack", zs.Zombies)
	}
	var tok struct{ Token string }
	b.getJSON(t, "api/v1/token", &tok)
	if tok.Token != b.c.token || tok.Token == "" {
		t.Errorf("token = %q, want the handler's", tok.Token)
	}

	for path, ct := range map[string]string{"static/console.css": "text/css", "static/console.js": "text/javascript"} {
		res, err := http.Get(b.srv.URL + "/" + path)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), ct) {
			t.Errorf("GET /%s = %d %s, want 200 %s", path, res.StatusCode, res.Header.Get("Content-Type"), ct)
		}
	}
	for _, path := range []string{"nope", "api/v1/nope", "static/nope.js", "groups/x"} {
		if code, _ := b.get(t, path); code != http.StatusNotFound {
			t.Errorf("GET /%s = %d, want 404", path, code)
		}
	}
}

func TestNoScheduler(t *testing.T) {
	k, err := kernel.New(kernel.Config{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Options{Kernel: k, Actions: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = k.Close()
		<-h.(*console).sm.done
	}()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/schedules", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "No scheduler is attached") {
		t.Fatalf("GET /schedules = %d %s, want 200 and a note", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/api/v1/schedules/trigger", strings.NewReader(`{"name":"x"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Console-Token", h.(*console).token)
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "no scheduler") {
		t.Fatalf("POST trigger without a scheduler = %d %s, want 404", rec.Code, rec.Body)
	}
}

func TestRates(t *testing.T) {
	b := setup(t, Options{Interval: time.Minute})
	const n = 40
	for range n {
		h, err := b.k.TrySubmit(kernel.Task{Priority: kernel.Low, Run: func(context.Context) error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	b.c.sm.take()
	ov := b.c.overview(nil)
	low := ov.Priorities[2]
	if ov.RateSpanS <= 0 {
		t.Fatalf("RateSpanS = %v, want > 0 after two samples", ov.RateSpanS)
	}
	for name, got := range map[string]float64{"submitted": low.Rates.Submitted, "started": low.Rates.Started, "succeeded": low.Rates.Succeeded} {
		if math.Abs(got*ov.RateSpanS-n) > 1e-6 {
			t.Errorf("low %s rate = %v/s over %v s, want %d tasks", name, got, ov.RateSpanS, n)
		}
	}
	if low.Rates.Failed != 0 || low.RetryShare != 0 || ov.Priorities[0].Rates.Submitted != 0 {
		t.Errorf("rates = %+v, high %+v; want no failures, retries nor High work", low, ov.Priorities[0].Rates)
	}
	if len(ov.Samples) != 2 || math.Abs(ov.Samples[1].Ended*ov.RateSpanS-n) > 1e-6 {
		t.Errorf("samples = %+v, want two, the second with %d ended", ov.Samples, n)
	}
	// The span covers at most rateSpan intervals: older samples leave it.
	for range 2 * rateSpan {
		b.c.sm.take()
	}
	oldest, newest := b.c.sm.span()
	if got := b.c.overview(nil).Priorities[2].Rates.Submitted; got != 0 || newest.at.Sub(oldest.at) <= 0 {
		t.Errorf("low submitted rate = %v after idle samples, want 0", got)
	}
	if pts := b.c.sm.points(nil); len(pts) != 2*rateSpan+2 {
		t.Errorf("%d points, want %d", len(pts), 2*rateSpan+2)
	}
}

func TestHistoryRing(t *testing.T) {
	b := setup(t, Options{Interval: time.Minute, History: 3})
	for range 7 {
		b.c.sm.take()
	}
	pts := b.c.sm.points(nil)
	if len(pts) != 3 {
		t.Fatalf("%d points, want History (3)", len(pts))
	}
	for i := 1; i < len(pts); i++ {
		if pts[i].at.Before(pts[i-1].at) {
			t.Fatalf("points out of order: %v", pts)
		}
	}
}

func TestSamplerSamples(t *testing.T) {
	b := setup(t, Options{Interval: 10 * time.Millisecond})
	axtest.Eventually(t, func() bool { return len(b.c.sm.points(nil)) >= 3 }, "the sampler's samples")
	_, body := b.get(t, "")
	if !strings.Contains(body, "<polyline") || !strings.Contains(body, `data-refresh="500"`) {
		t.Fatalf("overview without a chart or with a refresh other than 500 ms:\n%s", body)
	}
	_ = b.k.Close()
	axtest.WaitOrTimeout(t, b.c.sm.done, "the sampler's end once the kernel stopped")
	if code, _ := b.get(t, "api/v1/overview"); code != http.StatusOK {
		t.Fatalf("GET api/v1/overview after the kernel stopped = %d, want 200", code)
	}
}

// links are the relative URLs a page refers to.
var linkRE = regexp.MustCompile(`(?:href|src|action|formaction)="([^"]*)"`)

func TestMountedUnderPrefix(t *testing.T) {
	for _, mode := range []string{"StripPrefix", "Options.Prefix"} {
		t.Run(mode, func(t *testing.T) {
			o := Options{Actions: true, Interval: time.Minute}
			if mode == "Options.Prefix" {
				o.Prefix = "/ops/console"
			}
			b := setup(t, o)
			mux := http.NewServeMux()
			if mode == "StripPrefix" {
				mux.Handle("/ops/console/", http.StripPrefix("/ops/console", b.h))
				mux.Handle("/ops/console", http.StripPrefix("/ops/console", b.h))
			} else {
				mux.Handle("/ops/console/", b.h)
				mux.Handle("/ops/console", b.h)
			}
			srv := httptest.NewServer(mux)
			defer srv.Close()

			res, err := noRedirect.Get(srv.URL + "/ops/console")
			if err != nil {
				t.Fatal(err)
			}
			_ = res.Body.Close()
			if loc := res.Header.Get("Location"); res.StatusCode != http.StatusFound || loc != "console/" {
				t.Fatalf("GET /ops/console = %d Location %q, want 302 to console/", res.StatusCode, loc)
			}
			seen := map[string]bool{}
			for _, page := range []string{"/ops/console/", "/ops/console/groups", "/ops/console/schedules", "/ops/console/zombies"} {
				res, err := http.Get(srv.URL + page)
				if err != nil {
					t.Fatal(err)
				}
				body := readAll(t, res)
				if res.StatusCode != http.StatusOK {
					t.Fatalf("GET %s = %d", page, res.StatusCode)
				}
				for _, m := range linkRE.FindAllStringSubmatch(body, -1) {
					u, err := res.Request.URL.Parse(m[1])
					if err != nil {
						t.Fatalf("%s: link %q: %v", page, m[1], err)
					}
					if !strings.HasPrefix(u.Path, "/ops/console/") {
						t.Errorf("%s: link %q resolves to %s, outside the prefix", page, m[1], u.Path)
					}
					seen[u.Path] = true
				}
			}
			for path := range seen {
				if strings.Contains(path, "/api/v1/") {
					continue // actions: POST only
				}
				res, err := http.Get(srv.URL + path)
				if err != nil {
					t.Fatal(err)
				}
				_ = res.Body.Close()
				if res.StatusCode != http.StatusOK {
					t.Errorf("GET %s (linked) = %d, want 200", path, res.StatusCode)
				}
			}
			for _, want := range []string{"/ops/console/", "/ops/console/groups", "/ops/console/static/console.css", "/ops/console/static/console.js", "/ops/console/api/v1/pause", "/ops/console/api/v1/resume"} {
				if !seen[want] {
					t.Errorf("no page links to %s", want)
				}
			}
			// A form's action under the prefix pauses, and the answer leads back to the page.
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/ops/console/api/v1/pause",
				strings.NewReader("token="+b.c.token+"&back=groups&group=upstream"))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", srv.URL)
			res, err = noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = res.Body.Close()
			loc, _ := res.Request.URL.Parse(res.Header.Get("Location"))
			if res.StatusCode != http.StatusSeeOther || loc.Path != "/ops/console/groups" || loc.RawQuery != "done=pause" {
				t.Fatalf("POST pause = %d Location %v, want 303 to /ops/console/groups?done=pause", res.StatusCode, loc)
			}
			if !b.k.Stats().Groups["upstream"].Paused {
				t.Fatal("the group is not paused after the form's POST")
			}
			_, body := getURL(t, srv.URL+"/ops/console/groups?done=pause")
			if !strings.Contains(body, `<p class="flash">Paused.</p>`) {
				t.Error("no flash after the action")
			}
			if mode == "Options.Prefix" {
				if code, _ := getURL(t, srv.URL+"/ops/consolex"); code != http.StatusNotFound {
					t.Errorf("GET /ops/consolex = %d, want 404", code)
				}
			}
		})
	}
}

func getURL(t *testing.T, u string) (int, string) {
	t.Helper()
	res, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, readAll(t, res)
}

func readAll(t *testing.T, res *http.Response) string {
	t.Helper()
	defer func() { _ = res.Body.Close() }()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
