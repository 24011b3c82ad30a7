package console

import (
	"context"
	"encoding/json"
	"errors"
	"html"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/axsched/ax/internal/axtest"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/schedule"
	"github.com/axsched/ax/store"
)

// hostile are strings a task or a user may bring: markup, attribute breakers,
// a textarea's end, a JavaScript URL and invalid UTF-8.
var hostile = []string{
	`<script>alert(1)</script>`,
	`"><img src=x onerror=alert(2)>`,
	`</textarea><script>alert(3)</script>`,
	`javascript:alert(4)`,
	"bad\xffutf8<b>x</b>",
	`'-alert(5)-'`,
}

// asJSON is what s becomes in the JSON API: itself, with U+FFFD for each byte
// of invalid UTF-8 (encoding/json's rule).
func asJSON(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// checkHTML fails unless body holds each of strs escaped, none of them raw, and
// nothing that would run.
func checkHTML(t *testing.T, page, body string, strs []string) {
	t.Helper()
	if !utf8.ValidString(body) {
		t.Errorf("%s: the page is not valid UTF-8", page)
	}
	for _, s := range strs {
		esc := template.HTMLEscapeString(asJSON(s))
		if !strings.Contains(body, esc) {
			t.Errorf("%s: no %q (%q escaped) in the page", page, esc, s)
		}
		if s != esc && strings.Contains(body, s) {
			t.Errorf("%s: %q appears unescaped", page, s)
		}
	}
	for _, bad := range []string{"<script>alert", "<img", "</textarea><script", `href="javascript:`} {
		if strings.Contains(body, bad) {
			t.Errorf("%s: %q in the page", page, bad)
		}
	}
	if n := strings.Count(body, "<script"); n != 1 {
		t.Errorf("%s: %d script elements, want 1", page, n)
	}
}

func TestHostileStrings(t *testing.T) {
	b := setup(t, Options{Actions: true, Interval: time.Minute})
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	fired := make(chan string, len(hostile))
	for _, s := range hostile {
		// A zombie whose task ID is s.
		if _, err := b.k.TrySubmit(kernel.Task{ID: s, Timeout: time.Millisecond, Retry: &kernel.RetryPolicy{MaxAttempts: 1}, Run: func(context.Context) error {
			<-release
			return nil
		}}); err != nil {
			t.Fatalf("TrySubmit(ID %q) = %v", s, err)
		}
		// A schedule named s.
		if _, err := b.s.Add(schedule.Every(time.Hour), func(ctx context.Context, _ schedule.Fire) error {
			fired <- s
			return nil
		}, &schedule.Options{Name: s}); err != nil {
			t.Fatalf("Add(Name %q) = %v", s, err)
		}
	}
	axtest.Eventually(t, func() bool {
		zs := b.k.Zombies()
		if len(zs) != len(hostile) {
			return false
		}
		for _, z := range zs {
			if len(z.Stack) == 0 {
				return false
			}
		}
		return true
	}, "the zombies with their stacks")

	_, body := b.get(t, "zombies")
	checkHTML(t, "zombies", body, hostile)
	_, body = b.get(t, "schedules")
	checkHTML(t, "schedules", body, hostile)

	var zs zombiesData
	b.getJSON(t, "api/v1/zombies", &zs)
	var ss schedulesData
	b.getJSON(t, "api/v1/schedules", &ss)
	for _, s := range hostile {
		var z, sc bool
		for _, x := range zs.Zombies {
			z = z || x.TaskID == asJSON(s)
		}
		for _, x := range ss.Schedules {
			sc = sc || x.Name == asJSON(s)
		}
		if !z || !sc {
			t.Errorf("JSON: zombie %v, schedule %v named %q; want both, intact", z, sc, s)
		}
	}
	_, raw := b.get(t, "api/v1/schedules")
	if strings.Contains(raw, "<script") || strings.Contains(raw, "<img") || !json.Valid([]byte(raw)) {
		t.Errorf("the JSON holds raw markup or is invalid: %s", raw)
	}

	// The schedules' forms carry the names intact, in their URL: triggering
	// through a row's form fires the schedule of that name, bytes that are not
	// UTF-8 included.
	actions := map[string]string{} // name → its trigger form's action
	for _, a := range formActions(body, "api/v1/schedules/trigger?") {
		u, err := url.Parse(a)
		if err != nil {
			t.Fatalf("a trigger form's action %q: %v", a, err)
		}
		actions[u.Query().Get("name")] = a
	}
	for _, s := range hostile {
		action, ok := actions[s]
		if !ok {
			t.Fatalf("no trigger form for %q among %q", s, actions)
		}
		res := b.postForm(t, action, url.Values{"token": {b.c.token}, "back": {"schedules"}}, b.srv.URL)
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("trigger %q by its form = %d, want 303", s, res.StatusCode)
		}
		if got := axtest.WaitOrTimeout(t, fired, "the triggered fire"); got != s {
			t.Fatalf("trigger %q fired %q", s, got)
		}
	}

	// Error texts that quote hostile input: a key of an unknown group, an unknown
	// schedule; in a page (a form's POST) and in JSON.
	for _, s := range hostile {
		form := url.Values{"token": {b.c.token}, "group": {s}, "key": {s}}
		req, _ := http.NewRequest(http.MethodPost, b.srv.URL+"/api/v1/pause", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(t, res)
		if res.StatusCode != http.StatusBadRequest {
			t.Errorf("pause of group %q = %d, want 400", s, res.StatusCode)
		}
		for _, bad := range []string{"<script>alert", "<img", "</textarea><script"} {
			if strings.Contains(body, bad) {
				t.Errorf("error page for %q holds %q", s, bad)
			}
		}
		code, out := b.postJSON(t, "api/v1/schedules/trigger", map[string]string{"name": s + "-missing"}, b.c.token)
		var e errorData
		if err := json.Unmarshal([]byte(out), &e); err != nil || code != http.StatusNotFound {
			t.Fatalf("trigger of a missing schedule = %d %s", code, out)
		}
		if want := strconv.Quote(asJSON(s) + "-missing"); !strings.Contains(e.Error, want) {
			t.Errorf("error %q does not name %q", e.Error, s)
		}
	}
}

// TestHostileScheduleErrors: schedules whose last occurrence failed with a hostile
// error text show it as text on the Schedules page (in the cell and in its
// title), and the JSON API returns it intact with the outcome "failed".
func TestHostileScheduleErrors(t *testing.T) {
	b := setup(t, Options{Interval: time.Minute})
	var es []*schedule.Entry
	for i, s := range hostile {
		e, err := b.s.Add(schedule.Every(time.Hour), func(context.Context, schedule.Fire) error {
			return errors.New(s)
		}, &schedule.Options{Name: "failing-" + strconv.Itoa(i), Retry: &kernel.RetryPolicy{MaxAttempts: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Trigger(); err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	axtest.Eventually(t, func() bool {
		for _, e := range es {
			if e.Last().Outcome != schedule.OutcomeFailed {
				return false
			}
		}
		return true
	}, "every schedule's occurrence failed")
	_, body := b.get(t, "schedules")
	checkHTML(t, "schedules", body, hostile)
	if n := strings.Count(body, `<span class="bad">failed</span>`); n != len(hostile) {
		t.Errorf("schedules: %d failed outcomes shown, want %d", n, len(hostile))
	}
	for _, s := range hostile {
		if want := `title="` + template.HTMLEscapeString(asJSON(s)) + `"`; !strings.Contains(body, want) {
			t.Errorf("schedules: no %s", want)
		}
	}
	var ss schedulesData
	b.getJSON(t, "api/v1/schedules", &ss)
	if len(ss.Schedules) != len(hostile) {
		t.Fatalf("api/v1/schedules: %d schedules, want %d", len(ss.Schedules), len(hostile))
	}
	for i, s := range hostile {
		x := ss.Schedules[i]
		if x.Name != "failing-"+strconv.Itoa(i) || x.LastOutcome != "failed" || x.LastError != asJSON(s) || x.LastOutcomeAt.IsZero() {
			t.Errorf("api/v1/schedules[%d] = %+v, want failing-%d failed with %q", i, x, i, s)
		}
	}
	_, raw := b.get(t, "api/v1/schedules")
	if strings.Contains(raw, "<script") || strings.Contains(raw, "<img") || !json.Valid([]byte(raw)) || !strings.Contains(raw, `"last_error":`) {
		t.Errorf("the JSON holds raw markup, is invalid or has no last_error: %s", raw)
	}
}

// TestHostileTasks stores dead letters whose ID, kind, group key, error and
// payload are hostile strings: the Tasks pages show them as text, the JSON API
// returns them intact, and the pages' forms act on the exact IDs, bytes that
// are not UTF-8 included.
func TestHostileTasks(t *testing.T) {
	tb := setupTasks(t, Options{Actions: true, Payloads: true})
	ctx := context.Background()
	for _, s := range hostile {
		if _, err := tb.st.Commit(ctx, []store.Change{{Op: store.OpInsert, Task: store.StoredTask{
			ID: s, Kind: s, Group: "g", Key: s, LastError: s, Payload: []byte(s), State: store.Failed, UpdatedAt: time.Now(),
		}}}); err != nil {
			t.Fatal(err)
		}
	}
	_, body := tb.get(t, "tasks")
	checkHTML(t, "tasks", body, hostile)
	_, body = tb.get(t, "tasks?state=failed&kind="+url.QueryEscape(hostile[0]))
	checkHTML(t, "tasks by kind", body, hostile[:1])
	for _, s := range hostile {
		_, body := tb.get(t, "task?id="+url.QueryEscape(s))
		checkHTML(t, "task "+s, body, []string{s})
		var d taskData
		tb.getJSON(t, "api/v1/tasks/"+url.PathEscape(s), &d)
		if d.ID != asJSON(s) || d.Kind != asJSON(s) || d.Key != asJSON(s) || d.LastError != asJSON(s) {
			t.Errorf("api/v1/tasks/%q = %+v, want its strings intact", s, d)
		}
	}
	var list tasksData
	tb.getJSON(t, "api/v1/tasks?group=g&limit=1000", &list)
	if len(list.Tasks) != len(hostile) {
		t.Fatalf("api/v1/tasks?group=g: %d tasks, want %d", len(list.Tasks), len(hostile))
	}
	_, raw := tb.get(t, "api/v1/tasks")
	if strings.Contains(raw, "<script") || strings.Contains(raw, "<img") || !json.Valid([]byte(raw)) {
		t.Errorf("the JSON holds raw markup or is invalid: %s", raw)
	}
	// The page's form for each task's purge carries its exact ID: the confirmed
	// purge deletes it.
	for _, s := range hostile {
		_, body := tb.get(t, "task?id="+url.QueryEscape(s))
		action := formAction(t, body, "api/v1/tasks/purge")
		form := url.Values{"token": {tb.c.token}, "confirm": {"yes"}, "back": {"task?id=" + url.QueryEscape(s)}}
		res := tb.postForm(t, action, form, tb.srv.URL)
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("purge of %q by its form = %d, want 303", s, res.StatusCode)
		}
		if st := tb.state(t, s); st != 0 {
			t.Errorf("the form's purge of %q left it %v", s, st)
		}
	}
}

// formAction returns the action, unescaped from HTML, of the first form of
// body whose action contains path.
func formAction(t *testing.T, body, path string) string {
	t.Helper()
	if as := formActions(body, path); len(as) > 0 {
		return as[0]
	}
	t.Fatalf("no form posting to %s in %s", path, body)
	return ""
}

// formActions returns the actions, unescaped from HTML, of the forms of body
// whose action contains path.
func formActions(body, path string) []string {
	var as []string
	for _, part := range strings.Split(body, `action="`)[1:] {
		a, _, _ := strings.Cut(part, `"`)
		if strings.Contains(a, path) {
			as = append(as, strings.TrimPrefix(html.UnescapeString(a), "./"))
		}
	}
	return as
}
