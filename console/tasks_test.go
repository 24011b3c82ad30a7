package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax/internal/axtest"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/storekit"
)

// taskBundle is a console on a kernel with a MemoryStore, served by httptest;
// the kind "job" fails (with an error holding markup) until healthy is set.
type taskBundle struct {
	*bundle
	st      *storekit.MemoryStore
	healthy atomic.Bool
	seen    chan string // the actions Authorize saw
}

func setupTasks(t *testing.T, o Options) *taskBundle {
	t.Helper()
	st := storekit.NewMemoryStore()
	k, err := kernel.New(kernel.Config{Store: st, MaxConcurrency: 4, Owner: "tasks-test"})
	if err != nil {
		t.Fatalf("kernel.New() = %v", err)
	}
	tb := &taskBundle{st: st, seen: make(chan string, 100)}
	if err := k.Register("job", func(context.Context, []byte) error {
		if tb.healthy.Load() {
			return nil
		}
		return errors.New("boom <b>bold</b>")
	}); err != nil {
		t.Fatal(err)
	}
	o.Kernel, o.Store = k, st
	if o.Interval == 0 {
		o.Interval = time.Minute
	}
	o.Authorize = func(_ *http.Request, action string) error {
		if action != ActionRead {
			tb.seen <- action
		}
		return nil
	}
	h, err := New(o)
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	c := h.(*console)
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		_ = k.Close()
		<-c.sm.done
		_ = st.Close()
	})
	tb.bundle = &bundle{k: k, h: h, c: c, srv: srv}
	return tb
}

// deadLetters submits n tasks of "job" with one attempt each and waits for them
// to fail; it returns their IDs.
func (tb *taskBundle) deadLetters(t *testing.T, n int) []string {
	t.Helper()
	var ids []string
	for range n {
		h, err := tb.k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "job", MaxAttempts: 1, Payload: []byte(`{"secret":"hunter2"}`)})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Wait(context.Background()); err == nil {
			t.Fatal("a job succeeded, want it to fail")
		}
		id := h.ID()
		// Wait returns when the task ended; its row is stored Failed a moment later.
		axtest.Eventually(t, func() bool { return tb.state(t, id) == store.Failed }, "the dead letter stored")
		ids = append(ids, id)
	}
	return ids
}

func (tb *taskBundle) state(t *testing.T, id string) store.State {
	t.Helper()
	ti, err := tb.st.LookupTask(context.Background(), id, false)
	if errors.Is(err, store.ErrUnknownTask) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return ti.State
}

func TestTasksListAndPages(t *testing.T) {
	tb := setupTasks(t, Options{Actions: true})
	dead := tb.deadLetters(t, 5)
	h, err := tb.k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "job", Delay: time.Hour, Group: "", UniqueKey: "later"})
	if err != nil {
		t.Fatal(err)
	}
	later := h.ID()

	// Every dead letter, two at a time, forward with next, then back with prev.
	var got []string
	var pages []tasksData
	path := "api/v1/tasks?state=failed&limit=2"
	for {
		var d tasksData
		tb.getJSON(t, path, &d)
		if len(d.Tasks) > 2 {
			t.Fatalf("GET %s: %d tasks, want at most 2", path, len(d.Tasks))
		}
		pages = append(pages, d)
		for _, x := range d.Tasks {
			got = append(got, x.ID)
			if x.State != "failed" || x.LastError != "boom <b>bold</b>" || x.Kind != "job" || x.Payload != "" || x.PayloadSize != 20 {
				t.Errorf("GET %s: task %+v", path, x)
			}
			if strings.Join(x.Actions, ",") != "requeue,purge" {
				t.Errorf("GET %s: %s actions = %v, want requeue, purge", path, x.ID, x.Actions)
			}
		}
		if d.Next == "" {
			break
		}
		path = "api/v1/tasks?state=failed&limit=2&after=" + url.QueryEscape(d.Next)
	}
	if len(got) != 5 || len(pages) != 3 {
		t.Fatalf("walk = %v in %d pages, want the 5 dead letters in 3", got, len(pages))
	}
	for _, id := range dead {
		if !strings.Contains(strings.Join(got, " "), id) {
			t.Errorf("dead letter %s not listed", id)
		}
	}
	var back tasksData
	tb.getJSON(t, "api/v1/tasks?state=failed&limit=2&before="+url.QueryEscape(pages[1].Prev), &back)
	if len(back.Tasks) != 2 || back.Tasks[0].ID != pages[0].Tasks[0].ID || back.Tasks[1].ID != pages[0].Tasks[1].ID {
		t.Errorf("the page before page 2 = %+v, want page 1 %+v", back.Tasks, pages[0].Tasks)
	}

	// Filters: the delayed task alone, by state, by kind and state, by ID.
	for _, path := range []string{"api/v1/tasks?state=delayed", "api/v1/tasks?kind=job&state=delayed", "api/v1/tasks?id=" + url.QueryEscape(later)} {
		var d tasksData
		tb.getJSON(t, path, &d)
		if len(d.Tasks) != 1 || d.Tasks[0].ID != later || strings.Join(d.Tasks[0].Actions, ",") != "cancel,run_now" {
			t.Errorf("GET %s = %+v, want %s alone, with cancel and run_now", path, d.Tasks, later)
		}
	}

	// The JSON shapes.
	_, raw := tb.get(t, "api/v1/tasks?state=delayed")
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(keysOf(t, []byte(raw)), " "); got != strings.Join(sortedFields("time filter tasks epoch"), " ") {
		t.Errorf("api/v1/tasks keys = %s", got)
	}
	var items []json.RawMessage
	_ = json.Unmarshal(m["tasks"], &items)
	if got := strings.Join(keysOf(t, items[0]), " "); got != strings.Join(sortedFields(
		"id kind state priority unique_key attempt max_attempts timeout_ms fence owner run_at created_at updated_at payload_size actions"), " ") {
		t.Errorf("a task's keys = %s", got)
	}

	// The pages: the list with its filter, links and bulk forms; a task's page; a
	// search by ID; no payload anywhere.
	_, body := tb.get(t, "tasks?state=failed&limit=2")
	for _, want := range []string{dead[0][:8], "Next →", "Requeue them", "Purge them…", "boom &lt;b&gt;bold&lt;/b&gt;", `<option value="failed" selected>`} {
		if !strings.Contains(body, want) {
			t.Errorf("tasks page: no %q", want)
		}
	}
	_, body = tb.get(t, "task?id="+url.QueryEscape(dead[0]))
	for _, want := range []string{dead[0], "Requeue", "Purge…", "Payload previews are off", "20 bytes"} {
		if !strings.Contains(body, want) {
			t.Errorf("task page: no %q", want)
		}
	}
	res, err := noRedirect.Get(tb.srv.URL + "/tasks?id=" + url.QueryEscape(dead[0]))
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if loc := res.Header.Get("Location"); res.StatusCode != http.StatusFound || loc != "task?id="+url.QueryEscape(dead[0]) {
		t.Errorf("search by ID = %d to %q, want 302 to the task's page", res.StatusCode, loc)
	}
	for _, path := range []string{"tasks", "task?id=" + url.QueryEscape(dead[0]), "api/v1/tasks", "api/v1/tasks/" + url.PathEscape(dead[0])} {
		if _, body := tb.get(t, path); strings.Contains(body, "hunter2") {
			t.Errorf("GET %s shows a payload", path)
		}
	}
	var one taskData
	tb.getJSON(t, "api/v1/tasks/"+url.PathEscape(dead[0]), &one)
	stored, err := tb.st.LookupTask(context.Background(), dead[0], false)
	if err != nil {
		t.Fatal(err)
	}
	if one.ID != dead[0] || one.State != "failed" || one.Attempt != 1 || one.Owner != stored.Owner || one.Fence != stored.Fence {
		t.Errorf("api/v1/tasks/{id} = %+v", one)
	}

	// Bad parameters name themselves; an unknown task is 404.
	for path, want := range map[string]string{
		"api/v1/tasks?state=bogus":              "parameter state",
		"api/v1/tasks?limit=0":                  "parameter limit",
		"api/v1/tasks?owner=x":                  "parameter owner",
		"api/v1/tasks?after=%21%21":             "TaskQuery.After",
		"api/v1/tasks?key=k":                    "TaskQuery.Key",
		"api/v1/tasks?after=a&before=b":         "TaskQuery.Before",
		"api/v1/tasks?owner=pool&state=delayed": "",
	} {
		code, body := tb.get(t, path)
		switch {
		case want == "" && code != http.StatusOK:
			t.Errorf("GET %s = %d %s, want 200", path, code, body)
		case want != "" && (code != http.StatusBadRequest || !strings.Contains(body, want)):
			t.Errorf("GET %s = %d %s, want 400 naming %s", path, code, body, want)
		}
	}
	if code, body := tb.get(t, "api/v1/tasks/nope"); code != http.StatusNotFound || !strings.Contains(body, `no task \"nope\"`) {
		t.Errorf("GET api/v1/tasks/nope = %d %s, want 404", code, body)
	}
}

func TestTaskActions(t *testing.T) {
	tb := setupTasks(t, Options{Actions: true})
	dead := tb.deadLetters(t, 4)
	ctx := context.Background()
	delayed := func() string {
		h, err := tb.k.SubmitDurable(ctx, kernel.DurableTask{Kind: "job", Delay: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return h.ID()
	}
	tok := tb.c.token
	post := func(path string, v any, want int) actionResult {
		t.Helper()
		code, body := tb.postJSON(t, path, v, tok)
		if code != want {
			t.Fatalf("POST %s %v = %d %s, want %d", path, v, code, body, want)
		}
		var r actionResult
		_ = json.Unmarshal([]byte(body), &r)
		return r
	}
	wantSeen := func(action string) {
		t.Helper()
		if got := axtest.WaitOrTimeout(t, tb.seen, "Authorize's call"); got != action {
			t.Errorf("Authorize saw %q, want %q", got, action)
		}
	}

	// Requeue: the dead letter runs again and succeeds.
	tb.healthy.Store(true)
	if r := post("api/v1/tasks/requeue", map[string]any{"id": dead[0]}, http.StatusOK); r.Count != 1 || r.Action != ActionTaskRequeue {
		t.Errorf("requeue = %+v, want count 1", r)
	}
	wantSeen(ActionTaskRequeue)
	axtest.Eventually(t, func() bool { return tb.state(t, dead[0]) == store.Succeeded }, "the requeued task's success")
	post("api/v1/tasks/requeue", map[string]any{"id": dead[0]}, http.StatusConflict) // not a dead letter now
	wantSeen(ActionTaskRequeue)

	// Purge: refused unconfirmed, then done.
	post("api/v1/tasks/purge", map[string]any{"ids": []string{dead[1]}}, http.StatusBadRequest)
	wantSeen(ActionTaskPurge)
	if tb.state(t, dead[1]) != store.Failed {
		t.Fatal("an unconfirmed purge deleted the task")
	}
	if r := post("api/v1/tasks/purge", map[string]any{"ids": []string{dead[1]}, "confirm": true}, http.StatusOK); r.Count != 1 {
		t.Errorf("purge = %+v, want count 1", r)
	}
	wantSeen(ActionTaskPurge)
	if tb.state(t, dead[1]) != 0 {
		t.Error("the purged task is still stored")
	}

	// Purge by the pages' forms: a confirmation page, then the purge.
	form := url.Values{"token": {tok}, "back": {"tasks?state=failed"}}
	req, _ := http.NewRequest(http.MethodPost, tb.srv.URL+"/api/v1/tasks/purge?"+url.Values{"ids": {dead[2], dead[3]}}.Encode(), strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", tb.srv.URL)
	res, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, res)
	wantSeen(ActionTaskPurge)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, dead[2]) || !strings.Contains(body, `name="confirm" value="yes"`) ||
		!strings.Contains(body, "Purge 2") {
		t.Fatalf("unconfirmed form purge = %d %s, want the confirmation page", res.StatusCode, body)
	}
	if tb.state(t, dead[2]) != store.Failed {
		t.Fatal("the confirmation page purged")
	}
	form.Set("confirm", "yes")
	res = tb.postForm(t, "api/v1/tasks/purge?"+url.Values{"ids": {dead[2], dead[3]}}.Encode(), form, tb.srv.URL)
	wantSeen(ActionTaskPurge)
	if loc := res.Header.Get("Location"); res.StatusCode != http.StatusSeeOther || loc != "../../../tasks?done=task.purge&state=failed" {
		t.Errorf("confirmed form purge = %d to %q, want 303 back to the filtered list", res.StatusCode, loc)
	}
	if tb.state(t, dead[2]) != 0 || tb.state(t, dead[3]) != 0 {
		t.Error("the confirmed purge left a task")
	}

	// Run now: a delayed task runs at once.
	id := delayed()
	if r := post("api/v1/tasks/run_now", map[string]any{"id": id}, http.StatusOK); r.Count != 1 {
		t.Errorf("run now = %+v, want count 1", r)
	}
	wantSeen(ActionTaskRunNow)
	axtest.Eventually(t, func() bool { return tb.state(t, id) == store.Succeeded }, "the task made due")

	// Cancel: a delayed task ends Canceled; an unknown one is 404.
	id = delayed()
	post("api/v1/tasks/cancel", map[string]any{"id": id}, http.StatusOK)
	wantSeen(ActionTaskCancel)
	axtest.Eventually(t, func() bool { return tb.state(t, id) == store.Canceled }, "the canceled task")
	post("api/v1/tasks/cancel", map[string]any{"id": "nope"}, http.StatusNotFound)
	wantSeen(ActionTaskCancel)
	post("api/v1/tasks/cancel", map[string]any{"ids": []string{"a", "b"}}, http.StatusBadRequest)
	wantSeen(ActionTaskCancel)
	post("api/v1/tasks/run_now", map[string]any{}, http.StatusBadRequest)
	wantSeen(ActionTaskRunNow)
}

// TestTaskActionsRefused: without Options.Actions, without the token, or from
// another origin, a purge changes nothing.
func TestTaskActionsRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		actions bool
		tok     bool
		origin  string
	}{
		{"actions off", false, true, ""},
		{"no token", true, false, ""},
		{"cross origin", true, true, "https://evil.example"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := setupTasks(t, Options{Actions: tc.actions})
			dead := tb.deadLetters(t, 1)
			tok := ""
			if tc.tok {
				tok = tb.c.token
			}
			var hdr []string
			if tc.origin != "" {
				hdr = []string{"Origin", tc.origin, "Sec-Fetch-Site", "cross-site"}
			}
			code, body := tb.postJSON(t, "api/v1/tasks/purge", map[string]any{"id": dead[0], "confirm": true}, tok, hdr...)
			if code != http.StatusForbidden {
				t.Errorf("purge = %d %s, want 403", code, body)
			}
			if tb.state(t, dead[0]) != store.Failed {
				t.Error("a refused purge deleted the task")
			}
		})
	}
}

func TestTasksWithoutStore(t *testing.T) {
	b := setup(t, Options{Interval: time.Minute})
	for _, path := range []string{"tasks", "api/v1/tasks", "api/v1/tasks/x"} {
		if code, body := b.get(t, path); code != http.StatusNotFound || !strings.Contains(body, "Options.Store") {
			t.Errorf("GET %s = %d %s, want 404 naming Options.Store", path, code, body)
		}
	}
	if _, body := b.get(t, ""); strings.Contains(body, `href="./tasks"`) {
		t.Error("the menu links to Tasks without a store")
	}
	if _, err := New(Options{Kernel: b.k, Store: plainStore{}}); err == nil || !strings.Contains(err.Error(), "console.Options.Store") {
		t.Errorf("New with a store that does not list = %v, want an error naming Options.Store", err)
	}
}

// plainStore is a store.Store that is no TaskLister.
type plainStore struct{ store.Store }

func TestTaskPayloadPreview(t *testing.T) {
	tb := setupTasks(t, Options{Payloads: true})
	ctx := context.Background()
	big := strings.Repeat("x", 3000)
	bin := string([]byte{0, 1, 0xff})
	for id, p := range map[string]string{"text": `{"a":"<b>"}`, "big": big, "bin": bin} {
		if _, err := tb.st.Commit(ctx, []store.Change{{Op: store.OpInsert, Task: store.StoredTask{
			ID: id, Kind: "job", Payload: []byte(p), State: store.Failed, UpdatedAt: time.Now(),
		}}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		id, payload, enc string
		truncated        bool
	}{
		{"text", `{"a":"<b>"}`, "text", false},
		{"big", big[:payloadPreviewMax], "text", true},
		{"bin", "0001ff", "hex", false},
	} {
		var d taskData
		tb.getJSON(t, "api/v1/tasks/"+tc.id, &d)
		if d.Payload != tc.payload || d.PayloadEncoding != tc.enc || d.PayloadTruncated != tc.truncated {
			t.Errorf("api/v1/tasks/%s payload = %q %s %v, want %q %s %v", tc.id, d.Payload, d.PayloadEncoding, d.PayloadTruncated, tc.payload, tc.enc, tc.truncated)
		}
	}
	if _, body := tb.get(t, "task?id=text"); !strings.Contains(body, "{&#34;a&#34;:&#34;&lt;b&gt;&#34;}") {
		t.Errorf("task page: no escaped payload in %s", body)
	}
	var list tasksData
	tb.getJSON(t, "api/v1/tasks", &list)
	for _, x := range list.Tasks {
		if x.Payload != "" {
			t.Errorf("the list shows %s's payload", x.ID)
		}
	}
}
