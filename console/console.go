package console

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"html/template"
	"maps"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/schedule"
	"github.com/axsched/ax/store"
	"github.com/benbjohnson/clock"
)

// console is the handler New returns. Every field is immutable after New.
type console struct {
	k         *kernel.Kernel
	s         *schedule.Scheduler // may be nil
	st        store.Store         // may be nil
	lister    store.TaskLister    // st as a lister; nil without st
	payloads  bool
	clk       clock.Clock
	every     time.Duration
	refresh   time.Duration
	sm        *sampler
	actions   bool
	authorize func(*http.Request, string) error // may be nil
	prefix    string
	token     string // the actions' token: an HMAC under the handler's random key
	cop       *http.CrossOriginProtection
	pages     map[string]*template.Template
	rc        replicaCache // the replicas on Options.Store
	flows     map[string]FlowRuns
	flowNames []string // the keys of flows, sorted
}

// New returns the console's handler for o.Kernel, and starts the goroutine that
// samples the kernel's Stats every o.Interval until the kernel's Shutdown or
// Close begins. It returns the errors of [Options.Validate].
//
// The handler serves, relative to where it is mounted: the pages "" (the
// overview), "groups", "schedules", "zombies", "tasks" and "task" (one
// task's page, ?id=), "flows" and "flow" (one run's page, ?flow=&id=); the JSON
// API under "api/v1/";
// and its assets under "static/". Its links are relative, so it works under any
// prefix: behind [http.StripPrefix], or with Options.Prefix. Each handler has a
// random key of its own, so an action's token is valid for the handler that
// made it only. It is safe for concurrent use.
func New(o Options) (http.Handler, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	every := o.Interval
	if every == 0 {
		every = intervalDefault
	}
	history := o.History
	if history == 0 {
		history = historyDefault
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("ax console actions v1"))
	cop := http.NewCrossOriginProtection()
	for _, origin := range o.TrustedOrigins {
		if err := cop.AddTrustedOrigin(strings.TrimSuffix(origin, "/")); err != nil {
			return nil, &kernel.ConfigError{Field: "console.Options.TrustedOrigins", Value: origin, Reason: err.Error()}
		}
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	c := &console{
		k: o.Kernel, s: o.Scheduler, st: o.Store, payloads: o.Payloads, clk: o.Kernel.Clock(), every: every, refresh: max(every, refreshMin),
		actions: o.Actions, authorize: o.Authorize, prefix: strings.TrimSuffix(o.Prefix, "/"),
		token: base64.RawURLEncoding.EncodeToString(mac.Sum(nil)), cop: cop, pages: pages,
	}
	c.flows = maps.Clone(o.Flows)
	c.flowNames = slices.Sorted(maps.Keys(c.flows))
	c.lister, _ = o.Store.(store.TaskLister)
	c.rc.rs, _ = o.Store.(store.ReplicaStore)
	c.rc.every = every
	c.sm = newSampler(o.Kernel, every, history)
	go c.sm.run()
	return c, nil
}

// route is what a path serves.
type route struct {
	method string // GET (and HEAD) or POST
	action string // what Authorize is asked
	serve  func(c *console, w http.ResponseWriter, r *http.Request, rel, action string)
}

var routes = map[string]route{
	"":                         {http.MethodGet, ActionRead, (*console).servePage},
	"groups":                   {http.MethodGet, ActionRead, (*console).servePage},
	"schedules":                {http.MethodGet, ActionRead, (*console).servePage},
	"zombies":                  {http.MethodGet, ActionRead, (*console).servePage},
	"static/console.css":       {http.MethodGet, ActionRead, (*console).serveAsset},
	"static/console.js":        {http.MethodGet, ActionRead, (*console).serveAsset},
	"api/v1/overview":          {http.MethodGet, ActionRead, (*console).serveAPI},
	"api/v1/groups":            {http.MethodGet, ActionRead, (*console).serveAPI},
	"api/v1/schedules":         {http.MethodGet, ActionRead, (*console).serveAPI},
	"api/v1/zombies":           {http.MethodGet, ActionRead, (*console).serveAPI},
	"api/v1/replicas":          {http.MethodGet, ActionRead, (*console).serveAPI},
	"api/v1/token":             {http.MethodGet, ActionRead, (*console).serveAPI},
	"api/v1/pause":             {http.MethodPost, ActionPause, (*console).act},
	"api/v1/resume":            {http.MethodPost, ActionResume, (*console).act},
	"api/v1/schedules/pause":   {http.MethodPost, ActionSchedulePause, (*console).act},
	"api/v1/schedules/resume":  {http.MethodPost, ActionScheduleResume, (*console).act},
	"api/v1/schedules/trigger": {http.MethodPost, ActionScheduleTrigger, (*console).act},
	"tasks":                    {http.MethodGet, ActionRead, (*console).serveTasks},
	"task":                     {http.MethodGet, ActionRead, (*console).serveTasks},
	"api/v1/tasks":             {http.MethodGet, ActionRead, (*console).serveTasks},
	"api/v1/tasks/cancel":      {http.MethodPost, ActionTaskCancel, (*console).act},
	"api/v1/tasks/run_now":     {http.MethodPost, ActionTaskRunNow, (*console).act},
	"api/v1/tasks/requeue":     {http.MethodPost, ActionTaskRequeue, (*console).act},
	"api/v1/tasks/purge":       {http.MethodPost, ActionTaskPurge, (*console).act},
	"flows":                    {http.MethodGet, ActionRead, (*console).serveFlows},
	"flow":                     {http.MethodGet, ActionRead, (*console).serveFlows},
	"api/v1/flows":             {http.MethodGet, ActionRead, (*console).serveFlows},
	"api/v1/flows/run":         {http.MethodGet, ActionRead, (*console).serveFlows},
	"api/v1/flows/cancel":      {http.MethodPost, ActionFlowCancel, (*console).act},
	"api/v1/flows/retry":       {http.MethodPost, ActionFlowRetry, (*console).act},
}

// taskRoute serves GET api/v1/tasks/{id}: every path under api/v1/tasks/ that
// names no action.
var taskRoute = route{http.MethodGet, ActionRead, (*console).serveTasks}

// ServeHTTP serves the console's pages, API and assets.
func (c *console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "+
		"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")

	p := r.URL.Path
	if c.prefix != "" {
		rest, ok := strings.CutPrefix(p, c.prefix)
		if !ok || (rest != "" && rest[0] != '/') {
			c.authorized(w, r, "", ActionRead, func() { c.fail(w, r, "", http.StatusNotFound, errors.New("console: not found")) })
			return
		}
		p = rest
	}
	rel := strings.TrimPrefix(p, "/")
	rt, ok := routes[rel]
	if !ok && strings.HasPrefix(rel, taskAPIPrefix) && len(rel) > len(taskAPIPrefix) {
		rt, ok = taskRoute, true
	}
	if !ok {
		c.authorized(w, r, rel, ActionRead, func() { c.fail(w, r, rel, http.StatusNotFound, errors.New("console: not found")) })
		return
	}
	c.authorized(w, r, rel, rt.action, func() {
		method := r.Method
		if method == http.MethodHead {
			method = http.MethodGet
		}
		if method != rt.method {
			allow := rt.method
			if allow == http.MethodGet {
				allow = "GET, HEAD"
			}
			h.Set("Allow", allow)
			c.fail(w, r, rel, http.StatusMethodNotAllowed, errors.New("console: method "+r.Method+" not allowed"))
			return
		}
		if rel == "" && p == "" {
			if orig := originalPath(r); !strings.HasSuffix(orig, "/") {
				// Relative links resolve against a directory: send the browser to it.
				h.Set("Location", path.Base(orig)+"/")
				w.WriteHeader(http.StatusFound)
				return
			}
		}
		rt.serve(c, w, r, rel, rt.action)
	})
}

// authorized calls serve if Authorize allows action, and refuses the request
// otherwise.
func (c *console) authorized(w http.ResponseWriter, r *http.Request, rel, action string, serve func()) {
	if c.authorize != nil {
		if err := c.authorize(r, action); err != nil {
			c.fail(w, r, rel, http.StatusForbidden, err)
			return
		}
	}
	serve()
}

// originalPath is the request's path as the client sent it, before a
// StripPrefix.
func originalPath(r *http.Request) string {
	if u, err := url.ParseRequestURI(r.RequestURI); err == nil && u.Path != "" {
		return u.Path
	}
	return r.URL.Path
}

// isAPI reports whether rel is a path of the JSON API.
func isAPI(rel string) bool { return strings.HasPrefix(rel, "api/") }

// fail answers a refused or failed request: JSON under api/, a page elsewhere.
func (c *console) fail(w http.ResponseWriter, r *http.Request, rel string, code int, err error) {
	if isAPI(rel) {
		writeJSON(w, code, errorData{Error: err.Error()})
		return
	}
	c.render(w, code, "error", pageData{Title: http.StatusText(code), Error: err.Error(), Base: base(rel)})
}

type errorData struct {
	Error string `json:"error"`
}

// base is the relative path from rel back to the handler's root.
func base(rel string) string {
	n := strings.Count(rel, "/")
	if n == 0 {
		return "./"
	}
	return strings.Repeat("../", n)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		http.Error(w, "console: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

func (c *console) serveAPI(w http.ResponseWriter, r *http.Request, rel, _ string) {
	var v any
	switch rel {
	case "api/v1/overview":
		v = c.overview(nil)
	case "api/v1/groups":
		v = c.groups()
	case "api/v1/schedules":
		v = c.schedules()
	case "api/v1/zombies":
		v = c.zombies()
	case "api/v1/replicas":
		v = c.replicas(r.Context())
	case "api/v1/token":
		if !c.actions {
			c.fail(w, r, rel, http.StatusForbidden, errActionsOff)
			return
		}
		v = struct {
			Token string `json:"token"`
		}{c.token}
	}
	writeJSON(w, http.StatusOK, v)
}
