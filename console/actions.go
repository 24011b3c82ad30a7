package console

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/schedule"
)

// actionBodyMax bounds an action's body.
const actionBodyMax = 64 << 10

var (
	errActionsOff = errors.New("console: actions are disabled (console.Options.Actions)")
	errBadToken   = errors.New("console: missing or wrong token (X-Console-Token header or token field)")
	errNoSchedule = errors.New("console: no scheduler is attached (console.Options.Scheduler)")
)

// actionRequest is the body of an action: JSON, or a form's fields of the same
// names.
type actionRequest struct {
	Group    string `json:"group"`
	Key      string `json:"key"`
	Priority string `json:"priority"` // "high", "normal" or "low"
	Kind     string `json:"kind"`
	Name     string `json:"name"` // a schedule's
	// ID names a durable task; IDs name several (requeue and purge take both).
	ID      string   `json:"id"`
	IDs     []string `json:"ids"`
	Confirm bool     `json:"confirm"` // a purge's confirmation
	// Flow names a flow of Options.Flows, ID its run, Stage a stage to retry.
	Flow  string `json:"flow"`
	Stage string `json:"stage"`

	count int // the tasks a task's action found or changed
}

// actionResult answers an action in JSON.
type actionResult struct {
	OK     bool   `json:"ok"`
	Action string `json:"action"`
	Target string `json:"target"`
	// Count is, for a task's action, the tasks it found (cancel, run now) or
	// changed (requeue, purge).
	Count int `json:"count,omitempty"`
}

// pages a form may return to (its "back" field).
var backPages = map[string]bool{
	"": true, "groups": true, "schedules": true, "zombies": true, "tasks": true, "task": true, "flows": true, "flow": true,
}

// backTo is the page a form's "back" field names, with its query (filters, a
// task's ID) re-encoded and done=action added: one of backPages, or the overview.
func backTo(back, action string) string {
	p, raw, _ := strings.Cut(back, "?")
	q, err := url.ParseQuery(raw)
	if !backPages[p] || err != nil {
		p, q = "", url.Values{}
	}
	q.Set("done", action)
	return p + "?" + q.Encode()
}

// act serves an action's POST: refused unless actions are enabled, the request
// passes the same-origin check and carries the token; then applied.
func (c *console) act(w http.ResponseWriter, r *http.Request, rel, action string) {
	if !c.actions {
		c.fail(w, r, rel, http.StatusForbidden, errActionsOff)
		return
	}
	if err := c.cop.Check(r); err != nil {
		c.fail(w, r, rel, http.StatusForbidden, errors.New("console: cross-origin request refused"))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, actionBodyMax)
	var req actionRequest
	token := r.Header.Get("X-Console-Token")
	form := false
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			c.fail(w, r, rel, http.StatusBadRequest, errors.New("console: the body is not an action's JSON: "+err.Error()))
			return
		}
	case "application/x-www-form-urlencoded", "multipart/form-data":
		if err := r.ParseMultipartForm(actionBodyMax); err != nil && !errors.Is(err, http.ErrNotMultipart) {
			c.fail(w, r, rel, http.StatusBadRequest, errors.New("console: the form does not parse: "+err.Error()))
			return
		}
		form = true
		f := r.PostForm
		req = actionRequest{
			Group: f.Get("group"), Key: f.Get("key"), Priority: f.Get("priority"), Kind: f.Get("kind"),
			// A schedule's name, task IDs and a flow's names may come in the form's
			// URL, where they keep bytes that are not UTF-8 (a form's field would
			// get U+FFFD).
			Name: r.Form.Get("name"), ID: r.Form.Get("id"), IDs: r.Form["ids"], Confirm: f.Get("confirm") == "yes",
			Flow: r.Form.Get("flow"), Stage: r.Form.Get("stage"),
		}
		if token == "" {
			token = f.Get("token")
		}
	default:
		c.fail(w, r, rel, http.StatusUnsupportedMediaType, errors.New("console: an action's body is JSON or a form"))
		return
	}
	if !hmac.Equal([]byte(token), []byte(c.token)) {
		c.fail(w, r, rel, http.StatusForbidden, errBadToken)
		return
	}
	target, code, err := c.apply(r.Context(), action, &req)
	if form && errors.Is(err, errUnconfirmed) {
		c.confirm(w, rel, r.PostForm.Get("back"), &req)
		return
	}
	if err != nil {
		c.fail(w, r, rel, code, err)
		return
	}
	if form {
		w.Header().Set("Location", base(rel)+backTo(r.PostForm.Get("back"), action))
		w.WriteHeader(http.StatusSeeOther)
		return
	}
	writeJSON(w, http.StatusOK, actionResult{OK: true, Action: action, Target: target, Count: req.count})
}

// apply carries out action and returns what it acted on, or the status and the
// error that refused it.
func (c *console) apply(ctx context.Context, action string, req *actionRequest) (string, int, error) {
	switch action {
	case ActionTaskCancel, ActionTaskRunNow, ActionTaskRequeue, ActionTaskPurge:
		return c.applyTask(ctx, action, req)
	case ActionFlowCancel, ActionFlowRetry:
		return c.applyFlow(ctx, action, req)
	case ActionPause, ActionResume:
		sel := kernel.Selector{Group: req.Group, Key: req.Key, Kind: req.Kind}
		switch strings.ToLower(req.Priority) {
		case "":
		case "high":
			sel.Priority = kernel.High
		case "normal":
			sel.Priority = kernel.Normal
		case "low":
			sel.Priority = kernel.Low
		default:
			return "", http.StatusBadRequest, errors.New(`console: priority must be "high", "normal" or "low"`)
		}
		var err error
		if action == ActionPause {
			err = c.k.Pause(sel)
		} else {
			err = c.k.Resume(sel)
		}
		if err != nil {
			return "", statusOf(err), err
		}
		return sel.String(), 0, nil
	}
	if c.s == nil {
		return "", http.StatusNotFound, errNoSchedule
	}
	e := c.s.Entry(req.Name)
	if e == nil {
		return "", http.StatusNotFound, errors.New("console: no schedule named " + quote(req.Name))
	}
	var err error
	switch action {
	case ActionSchedulePause:
		err = e.Pause()
	case ActionScheduleResume:
		err = e.Resume()
	case ActionScheduleTrigger:
		err = e.Trigger()
	}
	if err != nil {
		return "", statusOf(err), err
	}
	return req.Name, 0, nil
}

// statusOf is the HTTP status of an action's error.
func statusOf(err error) int {
	switch {
	case errors.Is(err, kernel.ErrClosed), errors.Is(err, schedule.ErrStopped):
		return http.StatusServiceUnavailable
	case errors.Is(err, schedule.ErrRemoved), errors.Is(err, kernel.ErrUnknownTask):
		return http.StatusNotFound
	}
	return http.StatusBadRequest
}

// quote quotes s for an error message, keeping it short.
func quote(s string) string {
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return strconv.Quote(s)
}
