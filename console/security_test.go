package console

import (
	"context"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/internal/axtest"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/schedule"
)

// every path the handler serves, with the method and the action Authorize is
// asked about.
var allRoutes = func() []struct{ path, method, action string } {
	var out []struct{ path, method, action string }
	for p, rt := range routes {
		out = append(out, struct{ path, method, action string }{p, rt.method, rt.action})
	}
	slices.SortFunc(out, func(a, b struct{ path, method, action string }) int { return strings.Compare(a.path, b.path) })
	return out
}()

// state is what the actions could change: the group's pause, the schedule's.
func state(t *testing.T, b *bundle, sched *schedule.Entry) string {
	t.Helper()
	g := b.k.Stats().Groups["upstream"]
	st := sched.Stats()
	return strings.Join([]string{
		"group paused " + strconv.FormatBool(g.Paused), "keys paused " + itoa(g.PausedKeys),
		"schedule paused " + strconv.FormatBool(st.Paused), "fires " + itoa(int(st.Fires)),
	}, ", ")
}

func itoa(n int) string { return strconv.Itoa(n) }

// hourly adds a schedule "job" that fires only when triggered, and returns it
// with a channel that receives each fire.
func hourly(t *testing.T, b *bundle, name string) (*schedule.Entry, chan struct{}) {
	t.Helper()
	fired := make(chan struct{}, 16)
	e, err := b.s.Add(schedule.Every(time.Hour), func(context.Context, schedule.Fire) error {
		fired <- struct{}{}
		return nil
	}, &schedule.Options{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return e, fired
}

// actionBodies are valid bodies of each action.
var actionBodies = map[string]url.Values{
	"api/v1/pause":             {"group": {"upstream"}},
	"api/v1/resume":            {"group": {"upstream"}},
	"api/v1/schedules/pause":   {"name": {"job"}},
	"api/v1/schedules/resume":  {"name": {"job"}},
	"api/v1/schedules/trigger": {"name": {"job"}},
	"api/v1/flows/cancel":      {"flow": {"etl"}, "id": {"r1"}},
	"api/v1/flows/retry":       {"flow": {"etl"}, "id": {"r2"}, "stage": {"clean"}},
}

func TestSecurityHeaders(t *testing.T) {
	b := setup(t, Options{Interval: time.Minute})
	for _, rt := range allRoutes {
		req, _ := http.NewRequest(rt.method, b.srv.URL+"/"+rt.path, nil)
		res, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		h := res.Header
		csp := h.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'", "object-src 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s /%s: CSP %q lacks %q", rt.method, rt.path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("%s /%s: CSP %q allows inline code", rt.method, rt.path, csp)
		}
		if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s /%s: headers %v, want nosniff and DENY", rt.method, rt.path, h)
		}
	}
	// The pages hold no inline script nor style: the one script is the asset.
	for _, p := range []string{"", "groups", "schedules", "zombies", "nope"} {
		_, body := b.get(t, p)
		if n := strings.Count(body, "<script"); n != 1 || !strings.Contains(body, `<script src="./static/console.js" defer></script>`) {
			t.Errorf("/%s: %d script elements, want the asset's only", p, n)
		}
		if strings.Contains(body, "<style") || strings.Contains(body, " style=") || regexpOnAttr.MatchString(body) {
			t.Errorf("/%s: inline style or event handler in the page", p)
		}
	}
}

func TestActionsDisabled(t *testing.T) {
	b := setup(t, Options{Interval: time.Minute}) // Actions false
	sched, _ := hourly(t, b, "job")
	before := state(t, b, sched)
	for path, form := range actionBodies {
		f := url.Values{"token": {b.c.token}}
		for k, v := range form {
			f[k] = v
		}
		if res := b.postForm(t, path, f, b.srv.URL); res.StatusCode != http.StatusForbidden {
			t.Errorf("POST /%s with actions disabled = %d, want 403", path, res.StatusCode)
		}
		if code, body := b.postJSON(t, path, formJSON(form), b.c.token); code != http.StatusForbidden || !strings.Contains(body, "actions are disabled") {
			t.Errorf("POST /%s (JSON) with actions disabled = %d %s, want 403", path, code, body)
		}
	}
	if code, _ := b.get(t, "api/v1/token"); code != http.StatusForbidden {
		t.Errorf("GET api/v1/token with actions disabled = %d, want 403", code)
	}
	_, body := b.get(t, "groups")
	if strings.Contains(body, "<form") || strings.Contains(body, b.c.token) {
		t.Error("the groups page shows forms or the token with actions disabled")
	}
	if after := state(t, b, sched); after != before {
		t.Fatalf("state %s, want %s: refused actions changed it", after, before)
	}
}

func formJSON(f url.Values) map[string]string {
	m := map[string]string{}
	for k := range f {
		m[k] = f.Get(k)
	}
	return m
}

func TestActionsRefusedWithoutTokenOrOrigin(t *testing.T) {
	b := setup(t, Options{Actions: true, Interval: time.Minute})
	sched, _ := hourly(t, b, "job")
	before := state(t, b, sched)
	for path, form := range actionBodies {
		with := func(tok string) url.Values {
			f := url.Values{}
			for k, v := range form {
				f[k] = v
			}
			if tok != "" {
				f.Set("token", tok)
			}
			return f
		}
		cases := []struct {
			name   string
			form   url.Values
			origin string
		}{
			{"no token", with(""), b.srv.URL},
			{"wrong token", with(b.c.token[:len(b.c.token)-1] + "x"), b.srv.URL},
			{"another origin", with(b.c.token), "https://evil.example"},
			{"null origin", with(b.c.token), "null"},
		}
		for _, c := range cases {
			if res := b.postForm(t, path, c.form, c.origin); res.StatusCode != http.StatusForbidden {
				t.Errorf("POST /%s (%s) = %d, want 403", path, c.name, res.StatusCode)
			}
		}
		if code, _ := b.postJSON(t, path, formJSON(form), ""); code != http.StatusForbidden {
			t.Errorf("POST /%s (JSON, no token) = %d, want 403", path, code)
		}
		if code, _ := b.postJSON(t, path, formJSON(form), "wrong"); code != http.StatusForbidden {
			t.Errorf("POST /%s (JSON, wrong token) = %d, want 403", path, code)
		}
		if code, _ := b.postJSON(t, path, formJSON(form), b.c.token, "Sec-Fetch-Site", "cross-site"); code != http.StatusForbidden {
			t.Errorf("POST /%s (JSON, Sec-Fetch-Site cross-site) = %d, want 403", path, code)
		}
		if code, _ := b.postJSON(t, path, formJSON(form), b.c.token, "Origin", "http://evil.example"); code != http.StatusForbidden {
			t.Errorf("POST /%s (JSON, another Origin) = %d, want 403", path, code)
		}
		// A token of another handler (another process's console) is refused too.
		other := setup(t, Options{Actions: true, Interval: time.Minute})
		if code, _ := b.postJSON(t, path, formJSON(form), other.c.token); code != http.StatusForbidden {
			t.Errorf("POST /%s with another handler's token = %d, want 403", path, code)
		}
	}
	for _, rt := range allRoutes {
		if rt.method == http.MethodPost {
			if code, _ := b.get(t, rt.path); code != http.StatusMethodNotAllowed {
				t.Errorf("GET /%s = %d, want 405", rt.path, code)
			}
		} else if code, _ := b.postJSON(t, rt.path, map[string]string{}, b.c.token); code != http.StatusMethodNotAllowed {
			t.Errorf("POST /%s = %d, want 405", rt.path, code)
		}
	}
	if after := state(t, b, sched); after != before {
		t.Fatalf("state %s, want %s: refused actions changed it", after, before)
	}
	// The same requests with the token from the same origin act.
	if res := b.postForm(t, "api/v1/pause", url.Values{"token": {b.c.token}, "group": {"upstream"}}, b.srv.URL); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST pause with the token = %d, want 303", res.StatusCode)
	}
	if code, body := b.postJSON(t, "api/v1/schedules/pause", map[string]string{"name": "job"}, b.c.token); code != http.StatusOK || !strings.Contains(body, `"ok":true`) {
		t.Fatalf("POST schedules/pause with the token = %d %s, want 200", code, body)
	}
	if after := state(t, b, sched); after != "group paused true, keys paused 0, schedule paused true, fires 0" {
		t.Fatalf("state %s after the allowed actions", after)
	}
}

func TestAuthorize(t *testing.T) {
	refusal := `no <script>alert("x")</script> for you`
	var mu sync.Mutex
	asked := map[string]string{}
	deny := true
	b := setup(t, Options{Actions: true, Interval: time.Minute, Authorize: func(r *http.Request, action string) error {
		mu.Lock()
		defer mu.Unlock()
		asked[r.Method+" "+r.URL.Path] = action
		if deny {
			return errors.New(refusal)
		}
		return nil
	}})
	sched, _ := hourly(t, b, "job")
	before := state(t, b, sched)
	for _, rt := range allRoutes {
		var code int
		var body string
		if rt.method == http.MethodGet {
			code, body = b.get(t, rt.path)
		} else {
			code, body = b.postJSON(t, rt.path, formJSON(actionBodies[rt.path]), b.c.token)
			if res := b.postForm(t, rt.path, url.Values{"token": {b.c.token}, "group": {"upstream"}, "name": {"job"}}, b.srv.URL); res.StatusCode != http.StatusForbidden {
				t.Errorf("POST /%s (form) = %d, want 403", rt.path, res.StatusCode)
			}
		}
		if code != http.StatusForbidden {
			t.Errorf("%s /%s = %d, want 403", rt.method, rt.path, code)
		}
		if strings.Contains(body, "<script>alert") {
			t.Errorf("%s /%s: the refusal's text is not escaped: %s", rt.method, rt.path, body)
		}
		if !strings.Contains(body, template.HTMLEscapeString(refusal)) && !strings.Contains(body, `no \u003cscript\u003ealert(\"x\")\u003c/script\u003e for you`) {
			t.Errorf("%s /%s: the refusal's text is missing: %s", rt.method, rt.path, body)
		}
		mu.Lock()
		got, ok := asked[rt.method+" /"+rt.path]
		mu.Unlock()
		if !ok || got != rt.action {
			t.Errorf("Authorize saw %s /%s as %q (%v), want %q", rt.method, rt.path, got, ok, rt.action)
		}
	}
	if code, _ := b.get(t, "no/such/page"); code != http.StatusForbidden {
		t.Errorf("GET an unknown path = %d, want 403: Authorize sees every request", code)
	}
	if after := state(t, b, sched); after != before {
		t.Fatalf("state %s, want %s: refused actions changed it", after, before)
	}
	mu.Lock()
	deny = false
	mu.Unlock()
	if code, _ := b.get(t, "groups"); code != http.StatusOK {
		t.Fatalf("GET groups once allowed = %d, want 200", code)
	}
}

func TestActionsChangeState(t *testing.T) {
	b := setup(t, Options{Actions: true, Interval: time.Minute})
	post := func(path string, body map[string]string) {
		t.Helper()
		if code, out := b.postJSON(t, path, body, b.c.token); code != http.StatusOK {
			t.Fatalf("POST /%s %v = %d %s, want 200", path, body, code, out)
		}
	}

	// Pause High: a High task waits while a Normal one runs; resume: it runs.
	post("api/v1/pause", map[string]string{"priority": "high"})
	started := make(chan struct{})
	high, err := b.k.TrySubmit(kernel.Task{Priority: kernel.High, Run: func(context.Context) error { close(started); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	normal, err := b.k.TrySubmit(kernel.Task{Priority: kernel.Normal, Run: func(context.Context) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if err := normal.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
		t.Fatal("a High task started while High was paused through the console")
	default:
	}
	var ov overviewData
	b.getJSON(t, "api/v1/overview", &ov)
	if ov.Priorities[0].Queued != 1 {
		t.Fatalf("High queued = %d while paused, want 1", ov.Priorities[0].Queued)
	}
	post("api/v1/resume", map[string]string{"priority": "HIGH"})
	if err := high.Wait(context.Background()); err != nil {
		t.Fatalf("the High task after Resume: %v", err)
	}

	// Pause a group and a key: the kernel reports them paused.
	post("api/v1/pause", map[string]string{"group": "upstream"})
	post("api/v1/pause", map[string]string{"group": "upstream", "key": "api.example"})
	var gs groupsData
	b.getJSON(t, "api/v1/groups", &gs)
	if g := gs.Groups[0]; !g.Paused || g.PausedKeys != 1 {
		t.Fatalf("group %+v, want paused with one paused key", g)
	}
	post("api/v1/resume", map[string]string{"group": "upstream"})
	post("api/v1/resume", map[string]string{"group": "upstream", "key": "api.example"})
	b.getJSON(t, "api/v1/groups", &gs)
	if g := gs.Groups[0]; g.Paused || g.PausedKeys != 0 {
		t.Fatalf("group %+v after resume, want running", g)
	}

	// Schedules: pause, resume, trigger (it fires).
	sched, fired := hourly(t, b, "job")
	post("api/v1/schedules/pause", map[string]string{"name": "job"})
	if !sched.Stats().Paused {
		t.Fatal("the schedule is not paused")
	}
	post("api/v1/schedules/trigger", map[string]string{"name": "job"})
	axtest.WaitOrTimeout(t, fired, "the triggered schedule's fire")
	post("api/v1/schedules/resume", map[string]string{"name": "job"})
	if st := sched.Stats(); st.Paused || st.Fires != 1 {
		t.Fatalf("schedule %+v, want resumed with one fire", st)
	}

	// Bad requests change nothing and say why.
	bad := []struct {
		path string
		body map[string]string
		code int
		want string
	}{
		{"api/v1/pause", map[string]string{"priority": "urgent"}, http.StatusBadRequest, "priority must be"},
		{"api/v1/pause", map[string]string{}, http.StatusBadRequest, "Selector"},
		{"api/v1/pause", map[string]string{"group": "nope"}, http.StatusBadRequest, "no such group"},
		{"api/v1/schedules/trigger", map[string]string{"name": "nope"}, http.StatusNotFound, `no schedule named \"nope\"`},
	}
	for _, c := range bad {
		if code, out := b.postJSON(t, c.path, c.body, b.c.token); code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("POST /%s %v = %d %s, want %d and %q", c.path, c.body, code, out, c.code, c.want)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, b.srv.URL+"/api/v1/pause", strings.NewReader("group=upstream"))
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("X-Console-Token", b.c.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("POST with text/plain = %d, want 415", res.StatusCode)
	}
	if g := b.k.Stats().Groups["upstream"]; g.Paused {
		t.Error("a bad request paused the group")
	}
	// Once the kernel stopped, an action answers 503.
	_ = b.k.Close()
	if code, _ := b.postJSON(t, "api/v1/pause", map[string]string{"group": "upstream"}, b.c.token); code != http.StatusServiceUnavailable {
		t.Errorf("POST pause after Close = %d, want 503", code)
	}
}

var regexpOnAttr = regexp.MustCompile(`<[^>]+\son[a-z]+=`)
