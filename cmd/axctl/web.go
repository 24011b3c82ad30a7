package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// web is the console target (--url): the JSON API of a kernel's console.
type web struct {
	base    *url.URL // the console's mount point, ending in "/"
	client  *http.Client
	headers http.Header
	token   string // the actions' token; fetched from api/v1/token when empty
}

var _ backend = (*web)(nil)

// responseMax bounds what axctl reads of one answer.
const responseMax = 64 << 20

func newWeb(raw, token string, headers []string, client *http.Client) (*web, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usagef("--url = %q: want an http or https URL, such as http://host:8080/console/", raw)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	u.RawQuery, u.Fragment = "", ""
	h := http.Header{}
	for _, kv := range headers {
		name, value, _ := strings.Cut(kv, ":")
		h.Add(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	if client == nil {
		client = http.DefaultClient
	}
	return &web{base: u, client: client, headers: h, token: token}, nil
}

func (w *web) close() error { return nil }

// apiError is the console's answer to a refused or failed request.
type apiError struct {
	Error string `json:"error"`
}

// do sends a request to the API path rel with the JSON body in (nil: a GET) and
// decodes the answer into out (nil: discarded).
func (w *web) do(ctx context.Context, rel string, in, out any) error {
	method, body := http.MethodGet, io.Reader(nil)
	if in != nil {
		method = http.MethodPost
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	u, err := w.base.Parse(rel) // rel: a relative path, escaped, and its query
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return err
	}
	for k, vs := range w.headers {
		req.Header[k] = vs
	}
	req.Header.Set("Accept", "application/json")
	if in != nil {
		if w.token == "" {
			var tok struct {
				Token string `json:"token"`
			}
			if err := w.do(ctx, "api/v1/token", nil, &tok); err != nil {
				return fmt.Errorf("the action token: %w", err)
			}
			w.token = tok.Token
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Console-Token", w.token)
	}
	res, err := w.client.Do(req)
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	defer func() { _ = res.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(res.Body, responseMax))
	if err != nil {
		return fmt.Errorf("console: %s %s: %w", method, rel, err)
	}
	if res.StatusCode != http.StatusOK {
		return w.statusError(method, rel, res.StatusCode, data)
	}
	if out == nil {
		return nil
	}
	if raw, ok := out.(*json.RawMessage); ok {
		*raw = append((*raw)[:0], data...)
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("console: %s %s: the answer is not the JSON expected (is --url a console's mount point?): %w", method, rel, err)
	}
	return nil
}

// statusError turns a console's error status into axctl's.
func (w *web) statusError(method, rel string, code int, data []byte) error {
	var ae apiError
	msg := strings.TrimSpace(string(data))
	if json.Unmarshal(data, &ae) == nil && ae.Error != "" {
		msg = ae.Error
	}
	if len(msg) > 300 {
		msg = msg[:300] + "..."
	}
	err := fmt.Errorf("console: %s %s: %d %s: %s", method, rel, code, http.StatusText(code), msg)
	switch code {
	case http.StatusNotFound:
		if strings.Contains(ae.Error, "no flows are attached") {
			return usagef("%s %s: the console at %s has no flows (console.Options.Flows)", method, rel, w.base)
		}
		if strings.Contains(ae.Error, "no store is attached") {
			return usagef("%s %s: the console at %s has no store (console.Options.Store): use --dsn", method, rel, w.base)
		}
		if ae.Error == "console: not found" || ae.Error == "" {
			return usagef("%s %s: the console at %s serves no such path (an older console, or --url is not its mount point)", method, rel, w.base)
		}
		return &cliError{code: exitNotFound, err: err}
	case http.StatusForbidden, http.StatusConflict:
		return &cliError{code: exitRefused, err: err}
	case http.StatusBadRequest, http.StatusMethodNotAllowed, http.StatusUnsupportedMediaType:
		return &cliError{code: exitUsage, err: err}
	}
	return err
}

// The console's answers, as far as axctl reads them (docs/console.md has them
// whole; --json prints them as they came).

type consoleSchedules struct {
	Scheduler bool          `json:"scheduler"`
	Schedules []scheduleRow `json:"schedules"`
}

func (w *web) schedules(ctx context.Context) ([]scheduleRow, error) {
	var v consoleSchedules
	if err := w.do(ctx, "api/v1/schedules", nil, &v); err != nil {
		return nil, err
	}
	return v.Schedules, nil
}

type actionBody struct {
	Group    string `json:"group,omitempty"`
	Key      string `json:"key,omitempty"`
	Priority string `json:"priority,omitempty"`
	Kind     string `json:"kind,omitempty"`
	Name     string `json:"name,omitempty"`
}

// actionAnswer is the console's answer to an action.
type actionAnswer struct {
	OK     bool   `json:"ok"`
	Action string `json:"action"`
	Target string `json:"target"`
}

func (w *web) pauseSchedule(ctx context.Context, name string, paused bool) error {
	path := "api/v1/schedules/resume"
	if paused {
		path = "api/v1/schedules/pause"
	}
	return w.do(ctx, path, actionBody{Name: name}, nil)
}

func (w *web) triggerSchedule(ctx context.Context, name string) error {
	return w.do(ctx, "api/v1/schedules/trigger", actionBody{Name: name}, nil)
}

// pause pauses (or resumes) what sel selects and returns the console's name of it.
func (w *web) pause(ctx context.Context, sel actionBody, paused bool) (string, error) {
	path := "api/v1/resume"
	if paused {
		path = "api/v1/pause"
	}
	var a actionAnswer
	err := w.do(ctx, path, sel, &a)
	return a.Target, err
}

// raw fetches an API path's JSON as it is.
func (w *web) raw(ctx context.Context, rel string) (json.RawMessage, error) {
	var m json.RawMessage
	err := w.do(ctx, rel, nil, &m)
	return m, err
}

// consoleTask is a task of api/v1/tasks and api/v1/tasks/{id}.
type consoleTask struct {
	ID          string    `json:"id"`
	Kind        string    `json:"kind"`
	State       string    `json:"state"`
	Priority    string    `json:"priority"`
	Group       string    `json:"group"`
	Key         string    `json:"key"`
	UniqueKey   string    `json:"unique_key"`
	Attempt     int       `json:"attempt"`
	MaxAttempts int       `json:"max_attempts"`
	TimeoutMS   float64   `json:"timeout_ms"`
	Fence       uint64    `json:"fence"`
	Owner       uint64    `json:"owner"`
	RunAt       time.Time `json:"run_at"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
	LastError   string    `json:"last_error"`
	PayloadSize int       `json:"payload_size"`
}

func (t *consoleTask) row() taskRow {
	r := taskRow{
		ID: t.ID, Kind: t.Kind, State: t.State, Priority: t.Priority, Group: t.Group, Key: t.Key, UniqueKey: t.UniqueKey,
		Attempt: t.Attempt, MaxAttempts: t.MaxAttempts, Fence: t.Fence, OwnerEpoch: t.Owner, RunAt: utc(t.RunAt),
		TimeoutMS: int64(t.TimeoutMS), PayloadBytes: t.PayloadSize, LastError: t.LastError,
		CreatedAt: utc(t.CreatedAt), UpdatedAt: utc(t.UpdatedAt),
	}
	if t.Owner != 0 {
		r.Owner = strconv.FormatUint(t.Owner, 10)
	}
	return r
}

func (w *web) tasks(ctx context.Context, f taskFilter) (taskPage, error) {
	q := url.Values{}
	for _, kv := range [][2]string{{"state", f.state}, {"kind", f.kind}, {"group", f.group}, {"key", f.key}, {"owner", f.owner}, {"after", f.after}, {"before", f.before}} {
		if kv[1] != "" {
			q.Set(kv[0], kv[1])
		}
	}
	if f.owner != "" && f.owner != "pool" {
		if n, err := strconv.ParseUint(f.owner, 10, 64); err != nil || n == 0 {
			return taskPage{}, usagef("--owner = %q: a console filters by an owner's epoch, or pool", f.owner)
		}
	}
	q.Set("limit", strconv.Itoa(f.limit))
	var v struct {
		Tasks      []consoleTask `json:"tasks"`
		Next, Prev string
	}
	if err := w.do(ctx, "api/v1/tasks?"+q.Encode(), nil, &v); err != nil {
		return taskPage{}, err
	}
	p := taskPage{Tasks: make([]taskRow, len(v.Tasks)), Next: v.Next, Prev: v.Prev}
	for i := range v.Tasks {
		p.Tasks[i] = v.Tasks[i].row()
	}
	return p, nil
}

func (w *web) task(ctx context.Context, id string) (taskRow, error) {
	var t consoleTask
	if err := w.do(ctx, "api/v1/tasks/"+url.PathEscape(id), nil, &t); err != nil {
		return taskRow{}, err
	}
	return t.row(), nil
}

// deadLetters lists the first dead letters of each dead state, as a console
// filters by one state: their first limit by ID. It pages no further.
func (w *web) deadLetters(ctx context.Context, limit int, after string) (taskPage, error) {
	if after != "" {
		return taskPage{}, usagef("--after: a console lists dead letters by state: page with axctl tasks list --state STATE --after CURSOR")
	}
	var (
		out  taskPage
		more []string
	)
	for _, st := range deadStates {
		p, err := w.tasks(ctx, taskFilter{state: st, limit: limit})
		if err != nil {
			return taskPage{}, err
		}
		out.Tasks = append(out.Tasks, p.Tasks...)
		if p.Next != "" {
			more = append(more, st)
		}
	}
	slices.SortFunc(out.Tasks, func(a, b taskRow) int { return strings.Compare(a.ID, b.ID) })
	if len(out.Tasks) > limit {
		out.Tasks = out.Tasks[:limit]
		more = []string{"STATE"}
	}
	if len(more) > 0 {
		out.hint = "more: axctl tasks list --state " + strings.Join(more, "|") + " pages them one state at a time"
	}
	return out, nil
}

// taskAction posts a task action with ids, in chunks of what a console takes at
// once, and returns the tasks it changed. A conflict (none of the IDs was a dead
// letter) changes none.
func (w *web) taskAction(ctx context.Context, action string, ids []string, confirm bool) (int, error) {
	n := 0
	for chunk := range slices.Chunk(ids, limitMax) {
		var a struct {
			Count int `json:"count"`
		}
		err := w.do(ctx, "api/v1/tasks/"+action, struct {
			IDs     []string `json:"ids"`
			Confirm bool     `json:"confirm,omitempty"`
		}{chunk, confirm}, &a)
		var ce *cliError
		if errors.As(err, &ce) && ce.code == exitRefused && strings.Contains(err.Error(), "409") {
			continue
		}
		if err != nil {
			return n, err
		}
		n += a.Count
	}
	return n, nil
}

func (w *web) requeue(ctx context.Context, ids []string) (int, error) {
	return w.taskAction(ctx, "requeue", ids, false)
}

func (w *web) purge(ctx context.Context, ids []string) (int, error) {
	return w.taskAction(ctx, "purge", ids, true)
}

// owners lists the live owners of the console's store, from api/v1/replicas.
func (w *web) owners(ctx context.Context) ([]ownerRow, error) {
	var v struct {
		Store     bool      `json:"store"`
		StoreTime time.Time `json:"store_time"`
		Error     string    `json:"error"`
		Replicas  []struct {
			Owner       string  `json:"owner"`
			Epoch       uint64  `json:"epoch"`
			LeaseMS     float64 `json:"lease_ms"`
			LeaseLeftMS float64 `json:"lease_left_ms"`
		} `json:"replicas"`
	}
	if err := w.do(ctx, "api/v1/replicas", nil, &v); err != nil {
		return nil, err
	}
	switch {
	case !v.Store:
		return nil, usagef("owners: the console at %s has no store that keeps replicas (console.Options.Store): use --dsn", w.base)
	case v.Error != "":
		return nil, fmt.Errorf("owners: the console's store did not answer: %s", v.Error)
	}
	out := make([]ownerRow, len(v.Replicas))
	for i, r := range v.Replicas {
		out[i] = ownerRow{
			Name: r.Owner, Epoch: r.Epoch, LeaseMS: int64(r.LeaseMS), Live: true,
			Expires: utc(v.StoreTime.Add(sinceMS(r.LeaseLeftMS))).Truncate(time.Millisecond),
		}
	}
	return out, nil
}

// sinceMS is a duration in milliseconds as the console writes them.
func sinceMS(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }
