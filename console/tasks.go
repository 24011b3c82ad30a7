package console

import (
	"context"
	"encoding/hex"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/axsched/ax/store"
)

// taskAPIPrefix is the path of GET api/v1/tasks/{id}.
const taskAPIPrefix = "api/v1/tasks/"

// payloadPreviewMax is the most bytes of a payload the console shows.
const payloadPreviewMax = 1 << 10

var (
	errNoStore     = errors.New("console: no store is attached (console.Options.Store)")
	errUnconfirmed = errors.New(`console: a purge deletes dead letters for good: send it again with "confirm": true (a form: confirm=yes)`)
)

// tasksData is GET api/v1/tasks: a page of the store's durable tasks.
type tasksData struct {
	Time   time.Time  `json:"time"`
	Filter taskFilter `json:"filter"`
	Tasks  []taskData `json:"tasks"`
	// Next and Prev are the cursors of the next and the previous page (the
	// after and before parameters), empty when there is none.
	Next string `json:"next,omitempty"`
	Prev string `json:"prev,omitempty"`
	// Epoch is this kernel's owner epoch on a shared store, 0 otherwise: the
	// tasks whose owner it is are this kernel's.
	Epoch uint64 `json:"epoch,omitempty"`

	// The pages' links, with the filter: not in the JSON.
	NextURL, PrevURL, FirstURL string          `json:"-"`
	Dead                       []string        `json:"-"` // the page's dead letters
	RequeueAll, PurgeAll       template.URL    `json:"-"` // the bulk actions' URLs, their IDs in the query
	States                     []string        `json:"-"`
	Query                      store.TaskQuery `json:"-"`
}

// taskFilter is the filter of a tasks page, as its parameters spell it.
type taskFilter struct {
	State string `json:"state,omitempty"`
	Kind  string `json:"kind,omitempty"`
	Group string `json:"group,omitempty"`
	Key   string `json:"key,omitempty"`
	Owner string `json:"owner,omitempty"` // an epoch, or "pool"
	Limit int    `json:"limit"`
}

// taskData is one durable task: an item of api/v1/tasks and GET
// api/v1/tasks/{id}.
type taskData struct {
	ID          string    `json:"id"`
	Kind        string    `json:"kind"`
	State       string    `json:"state"`
	Priority    string    `json:"priority"`
	Group       string    `json:"group,omitempty"`
	Key         string    `json:"key,omitempty"`
	UniqueKey   string    `json:"unique_key,omitempty"`
	Attempt     int       `json:"attempt"`
	MaxAttempts int       `json:"max_attempts"`
	TimeoutMS   float64   `json:"timeout_ms"`
	Fence       uint64    `json:"fence"`
	Owner       uint64    `json:"owner"` // the owner's epoch; 0: the pool, or none
	RunAt       time.Time `json:"run_at,omitzero"`
	CreatedAt   time.Time `json:"created_at,omitzero"`
	UpdatedAt   time.Time `json:"updated_at,omitzero"`
	LastError   string    `json:"last_error,omitempty"`
	PayloadSize int       `json:"payload_size"`
	// Payload is the payload's first 1 KiB, only with Options.Payloads and only
	// for one task: as text when it is valid UTF-8, in hex otherwise
	// (PayloadEncoding "text" or "hex").
	Payload          string `json:"payload,omitempty"`
	PayloadEncoding  string `json:"payload_encoding,omitempty"`
	PayloadTruncated bool   `json:"payload_truncated,omitempty"`
	// ResultSize is the length of the result the task's last attempt left, in
	// bytes; Result previews its first 1 KiB as Payload does, only with
	// Options.Payloads and only for one task.
	ResultSize      int    `json:"result_size,omitempty"`
	Result          string `json:"result,omitempty"`
	ResultEncoding  string `json:"result_encoding,omitempty"`
	ResultTruncated bool   `json:"result_truncated,omitempty"`
	// Attempts are the records of the task's most recent ended attempts, oldest
	// first, only for one task.
	Attempts []attemptData `json:"attempts,omitempty"`
	// Actions are the actions that apply to the task in its state, when
	// Options.Actions is set: "cancel" and "run_now" for a live task (run_now
	// for a waiting one), "requeue" and "purge" for a dead letter.
	Actions []string `json:"actions,omitempty"`

	Mine bool `json:"-"` // this kernel is the owner
}

// attemptData is one ended attempt of a task (store.Attempt).
type attemptData struct {
	Number  int       `json:"number"`
	Start   time.Time `json:"start,omitzero"`
	End     time.Time `json:"end,omitzero"`
	Outcome string    `json:"outcome"`
	Error   string    `json:"error,omitempty"`
	Owner   string    `json:"owner,omitempty"`
}

// preview returns the first payloadPreviewMax bytes of p as text when they are
// valid UTF-8 ("text"), in hex otherwise ("hex"), and whether p was longer.
func preview(p []byte) (text, encoding string, truncated bool) {
	if len(p) > payloadPreviewMax {
		p, truncated = p[:payloadPreviewMax], true
	}
	switch {
	case len(p) == 0:
		return "", "", truncated
	case utf8.Valid(p):
		return string(p), "text", truncated
	}
	return hex.EncodeToString(p), "hex", truncated
}

// confirmData is the confirmation page of a purge.
type confirmData struct {
	IDs    []string
	Action template.URL // the purge's URL, the IDs in its query
	Cancel string       // the page to go back to
}

// stateNames are the states a filter takes, in the order of their life.
var stateNames = func() []string {
	var out []string
	for st := store.Delayed; st <= store.Abandoned; st++ {
		out = append(out, st.String())
	}
	return out
}()

// serveTasks serves the Tasks pages and their API: the list (tasks,
// api/v1/tasks) and one task (task?id=, api/v1/tasks/{id}).
func (c *console) serveTasks(w http.ResponseWriter, r *http.Request, rel, _ string) {
	if c.lister == nil {
		c.fail(w, r, rel, http.StatusNotFound, errNoStore)
		return
	}
	q := r.URL.Query()
	switch {
	case rel == "task":
		c.serveTask(w, r, rel, q.Get("id"))
		return
	case strings.HasPrefix(rel, taskAPIPrefix):
		c.serveTask(w, r, rel, strings.TrimPrefix(rel, taskAPIPrefix))
		return
	case rel == "tasks" && q.Get("id") != "":
		// The search by ID is a task's page.
		w.Header().Set("Location", "task?"+url.Values{"id": {q.Get("id")}}.Encode())
		w.WriteHeader(http.StatusFound)
		return
	}
	d, err := c.tasks(r.Context(), q)
	if err != nil {
		c.fail(w, r, rel, taskStatus(err), err)
		return
	}
	if isAPI(rel) {
		writeJSON(w, http.StatusOK, d)
		return
	}
	c.render(w, http.StatusOK, "tasks", pageData{
		Title: "Tasks", Nav: "tasks", Back: backURL("tasks", q), Flash: flashes[q.Get("done")], Tasks: &d,
	})
}

// backURL returns page with the query q but its done= flash: where an action on
// the page sends the browser back to.
func backURL(page string, q url.Values) string {
	back := url.Values{}
	for k, v := range q {
		if k != "done" {
			back[k] = v
		}
	}
	return page + "?" + back.Encode()
}

// tasks lists the page of tasks that the parameters q ask for. When q names an
// id, the page holds that task alone (or none).
func (c *console) tasks(ctx context.Context, q url.Values) (tasksData, error) {
	tq, f, err := parseTaskQuery(q)
	if err != nil {
		return tasksData{}, err
	}
	d := tasksData{Time: c.clk.Now(), Filter: f, Tasks: []taskData{}, States: stateNames, Query: tq}
	d.Epoch = c.k.Stats().Store.Epoch
	var infos []store.TaskInfo
	if id := q.Get("id"); id != "" {
		ti, err := c.lister.LookupTask(ctx, id, false)
		switch {
		case errors.Is(err, store.ErrUnknownTask):
		case err != nil:
			return tasksData{}, err
		default:
			infos = append(infos, ti)
		}
	} else {
		p, err := c.lister.ListTasks(ctx, tq)
		if err != nil {
			return tasksData{}, err
		}
		infos, d.Next, d.Prev = p.Tasks, p.Next, p.Prev
	}
	for i := range infos {
		t := c.taskOf(&infos[i], d.Epoch)
		d.Tasks = append(d.Tasks, t)
		if infos[i].State.DeadLetter() {
			d.Dead = append(d.Dead, t.ID)
		}
	}
	link := func(cursor, value string) string {
		v := filterValues(f)
		if cursor != "" {
			v.Set(cursor, value)
		}
		return "tasks?" + v.Encode()
	}
	d.FirstURL = link("", "")
	if d.Next != "" {
		d.NextURL = link("after", d.Next)
	}
	if d.Prev != "" {
		d.PrevURL = link("before", d.Prev)
	}
	if len(d.Dead) > 0 {
		ids := url.Values{"ids": d.Dead}.Encode()
		d.RequeueAll = template.URL("api/v1/tasks/requeue?" + ids) //nolint:gosec // IDs query-encoded by url.Values
		d.PurgeAll = template.URL("api/v1/tasks/purge?" + ids)     //nolint:gosec // IDs query-encoded by url.Values
	}
	return d, nil
}

// filterValues are the parameters that spell f.
func filterValues(f taskFilter) url.Values {
	v := url.Values{}
	for _, p := range [][2]string{{"state", f.State}, {"kind", f.Kind}, {"group", f.Group}, {"key", f.Key}, {"owner", f.Owner}} {
		if p[1] != "" {
			v.Set(p[0], p[1])
		}
	}
	if f.Limit != store.TaskListLimitDefault {
		v.Set("limit", strconv.Itoa(f.Limit))
	}
	return v
}

// parseTaskQuery reads a tasks page's parameters: state, kind, group, key, owner
// (an epoch or "pool"), limit, and the cursors after and before. A bad one is
// an error naming it.
func parseTaskQuery(q url.Values) (store.TaskQuery, taskFilter, error) {
	f := taskFilter{State: q.Get("state"), Kind: q.Get("kind"), Group: q.Get("group"), Key: q.Get("key"), Owner: q.Get("owner")}
	tq := store.TaskQuery{Kind: f.Kind, Group: f.Group, Key: f.Key, After: q.Get("after"), Before: q.Get("before")}
	bad := func(param, value, want string) error {
		return &paramError{msg: "console: parameter " + param + " = " + quote(value) + ": " + want}
	}
	if f.State != "" {
		for st := store.Delayed; st <= store.Abandoned; st++ {
			if st.String() == f.State {
				tq.State = st
			}
		}
		if tq.State == 0 {
			return tq, f, bad("state", f.State, "must be one of "+strings.Join(stateNames, ", "))
		}
	}
	switch f.Owner {
	case "":
	case "pool":
		tq.Pool = true
	default:
		n, err := strconv.ParseUint(f.Owner, 10, 64)
		if err != nil || n == 0 {
			return tq, f, bad("owner", f.Owner, `must be an owner's epoch (> 0) or "pool"`)
		}
		tq.Owner = n
	}
	f.Limit = store.TaskListLimitDefault
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > store.TaskListLimitMax {
			return tq, f, bad("limit", s, "must be 1 to "+strconv.Itoa(store.TaskListLimitMax))
		}
		f.Limit = n
	}
	tq.Limit = f.Limit
	if err := tq.Validate(); err != nil {
		return tq, f, &paramError{msg: "console: " + err.Error(), err: err}
	}
	return tq, f, nil
}

// paramError is a bad parameter of a request: 400 Bad Request (404 Not Found
// when it wraps store.ErrUnknownTask).
type paramError struct {
	msg string
	err error
}

func (e *paramError) Error() string { return e.msg }
func (e *paramError) Unwrap() error { return e.err }

// taskStatus is the HTTP status of a store's or a parameter's error.
func taskStatus(err error) int {
	var pe *paramError
	switch {
	case errors.Is(err, store.ErrUnknownTask):
		return http.StatusNotFound
	case errors.As(err, &pe), errors.Is(err, store.ErrInvalidQuery):
		return http.StatusBadRequest
	case errors.Is(err, store.ErrStoreUnavailable), errors.Is(err, store.ErrStoreClosed):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// serveTask serves one task's page or JSON.
func (c *console) serveTask(w http.ResponseWriter, r *http.Request, rel, id string) {
	if id == "" {
		c.fail(w, r, rel, http.StatusBadRequest, errors.New("console: parameter id is required"))
		return
	}
	ti, err := c.lister.LookupTask(r.Context(), id, c.payloads)
	if errors.Is(err, store.ErrUnknownTask) {
		err = &paramError{msg: "console: no task " + quote(id) + " in the store", err: store.ErrUnknownTask}
	}
	if err != nil {
		c.fail(w, r, rel, taskStatus(err), err)
		return
	}
	t := c.taskOf(&ti, c.k.Stats().Store.Epoch)
	t.ResultSize = len(ti.Result)
	if c.payloads {
		t.Payload, t.PayloadEncoding, t.PayloadTruncated = preview(ti.Payload)
		t.Result, t.ResultEncoding, t.ResultTruncated = preview(ti.Result)
	}
	for _, a := range ti.History {
		t.Attempts = append(t.Attempts, attemptData{Number: a.Number, Start: a.Start, End: a.End, Outcome: a.Outcome.String(), Error: a.Error, Owner: a.Owner})
	}
	if isAPI(rel) {
		writeJSON(w, http.StatusOK, t)
		return
	}
	c.render(w, http.StatusOK, "task", pageData{
		Title: "Task", Nav: "tasks", Back: "task?" + url.Values{"id": {id}}.Encode(),
		Flash: flashes[r.URL.Query().Get("done")], Task: &t,
	})
}

// taskOf is ti as the console shows it; epoch is this kernel's owner epoch.
func (c *console) taskOf(ti *store.TaskInfo, epoch uint64) taskData {
	t := taskData{
		ID: ti.ID, Kind: ti.Kind, State: ti.State.String(), Priority: ti.Priority.String(), Group: ti.Group, Key: ti.Key,
		UniqueKey: ti.UniqueKey, Attempt: ti.Attempt, MaxAttempts: ti.MaxAttempts, TimeoutMS: ms(ti.Timeout), Fence: ti.Fence,
		Owner: ti.Owner, RunAt: ti.RunAt, CreatedAt: ti.CreatedAt, UpdatedAt: ti.UpdatedAt, LastError: ti.LastError,
		PayloadSize: ti.PayloadSize, Mine: epoch != 0 && ti.Owner == epoch,
	}
	if c.actions {
		switch st := ti.State; {
		case st == store.Running:
			t.Actions = []string{"cancel"}
		case st.Live():
			t.Actions = []string{"cancel", "run_now"}
		case st.DeadLetter():
			t.Actions = []string{"requeue", "purge"}
		}
	}
	return t
}

// applyTask carries out a task's action: cancel, run now and requeue through the
// kernel, purge on the store once req.Confirm is set (errUnconfirmed before). It
// returns what it acted on, or the status and the error that refused it.
func (c *console) applyTask(ctx context.Context, action string, req *actionRequest) (string, int, error) {
	if c.st == nil {
		return "", http.StatusNotFound, errNoStore
	}
	ids := req.IDs
	if req.ID != "" {
		ids = append([]string{req.ID}, ids...)
	}
	switch {
	case len(ids) == 0:
		return "", http.StatusBadRequest, errors.New("console: id (or ids) is required")
	case len(ids) > store.TaskListLimitMax:
		return "", http.StatusBadRequest, errors.New("console: at most " + strconv.Itoa(store.TaskListLimitMax) + " ids at once")
	case len(ids) > 1 && (action == ActionTaskCancel || action == ActionTaskRunNow):
		return "", http.StatusBadRequest, errors.New("console: " + action + " takes one id")
	}
	switch action {
	case ActionTaskCancel:
		n, err := c.k.Cancel(ctx, ids[0])
		if err != nil {
			return "", statusOf(err), err
		}
		if n == 0 {
			return "", http.StatusNotFound, errors.New("console: no live task " + quote(ids[0]) +
				" in this kernel (a task another replica holds is canceled from that replica's console)")
		}
		req.count = n
		return ids[0], 0, nil
	case ActionTaskRunNow:
		n, err := c.k.RunNow(ctx, ids[0])
		if err != nil {
			return "", statusOf(err), err
		}
		req.count = n
		return ids[0], 0, nil
	case ActionTaskRequeue:
		n, err := c.k.Requeue(ctx, ids...)
		if err != nil {
			return "", taskStatus(err), err
		}
		if n == 0 {
			return "", http.StatusConflict, errors.New("console: no dead letter among " + quote(strings.Join(ids, ", ")))
		}
		req.count = n
		return strings.Join(ids, ", "), 0, nil
	default: // ActionTaskPurge
		if !req.Confirm {
			return "", http.StatusBadRequest, errUnconfirmed
		}
		n, err := c.st.Purge(ctx, ids...)
		if err != nil {
			return "", taskStatus(err), err
		}
		req.count = n
		return strings.Join(ids, ", "), 0, nil
	}
}

// confirm renders the confirmation page of a purge posted by a form without
// confirm=yes: the IDs, and a form that posts them again, confirmed.
func (c *console) confirm(w http.ResponseWriter, rel, back string, req *actionRequest) {
	ids := req.IDs
	if req.ID != "" {
		ids = append([]string{req.ID}, ids...)
	}
	b := base(rel)
	d := confirmData{
		IDs:    ids,
		Action: template.URL(b + "api/v1/tasks/purge?" + url.Values{"ids": ids}.Encode()), //nolint:gosec // IDs query-encoded
		Cancel: b + "tasks",
	}
	if p, _, _ := strings.Cut(back, "?"); backPages[p] {
		d.Cancel = b + back
	}
	c.render(w, http.StatusOK, "confirm", pageData{Title: "Purge dead letters?", Nav: "tasks", Base: b, Back: back, Confirm: &d})
}
