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
	u := w.base.JoinPath(rel)
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

var errNoTasksAPI = errors.New("the console serves no durable tasks: use --dsn")

func (w *web) tasks(context.Context, taskFilter) (taskPage, error) {
	return taskPage{}, &cliError{code: exitUsage, err: errNoTasksAPI}
}

func (w *web) task(context.Context, string) (taskRow, error) {
	return taskRow{}, &cliError{code: exitUsage, err: errNoTasksAPI}
}

func (w *web) deadLetters(context.Context, int, string) (taskPage, error) {
	return taskPage{}, &cliError{code: exitUsage, err: errNoTasksAPI}
}

func (w *web) countDead(context.Context) (int, error) {
	return 0, &cliError{code: exitUsage, err: errNoTasksAPI}
}

func (w *web) requeue(context.Context, []string) ([]string, error) {
	return nil, &cliError{code: exitUsage, err: errNoTasksAPI}
}

func (w *web) purge(context.Context, []string) (int, error) {
	return 0, &cliError{code: exitUsage, err: errNoTasksAPI}
}

func (w *web) owners(context.Context) ([]ownerRow, error) {
	return nil, &cliError{code: exitUsage, err: errors.New("the console serves no owners: use --dsn")}
}

// sinceMS is a duration in milliseconds as the console writes them.
func sinceMS(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }
