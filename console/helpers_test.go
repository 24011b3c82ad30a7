package console

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/schedule"
)

// bundle is a console on a real kernel and scheduler, served by httptest.
type bundle struct {
	k   *kernel.Kernel
	s   *schedule.Scheduler
	h   http.Handler
	c   *console
	srv *httptest.Server
}

// setup starts a kernel with a group "upstream", a scheduler and a console with
// o's fields (Kernel and Scheduler filled in), served at the root of a test
// server; all are stopped at the end of the test.
func setup(t *testing.T, o Options) *bundle {
	t.Helper()
	k, err := kernel.New(kernel.Config{
		MaxConcurrency: 4, ZombieGrace: time.Millisecond,
		Groups: map[string]kernel.GroupConfig{"upstream": {PerKey: kernel.Limits{Concurrency: 1}}},
	})
	if err != nil {
		t.Fatalf("kernel.New() = %v", err)
	}
	t.Cleanup(func() { _ = k.Close() })
	s, err := schedule.New(k, schedule.Config{})
	if err != nil {
		t.Fatalf("schedule.New() = %v", err)
	}
	t.Cleanup(s.Stop)
	o.Kernel, o.Scheduler = k, s
	h, err := New(o)
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	c := h.(*console)
	t.Cleanup(func() {
		_ = k.Close()
		<-c.sm.done
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &bundle{k: k, s: s, h: h, c: c, srv: srv}
}

// get fetches path from the test server and returns its status and body.
func (b *bundle) get(t *testing.T, path string) (int, string) {
	t.Helper()
	res, err := http.Get(b.srv.URL + "/" + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer func() { _ = res.Body.Close() }()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return res.StatusCode, string(body)
}

// getJSON fetches path and decodes its JSON into v.
func (b *bundle) getJSON(t *testing.T, path string, v any) {
	t.Helper()
	code, body := b.get(t, path)
	if code != http.StatusOK {
		t.Fatalf("GET %s = %d %s, want 200", path, code, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, body)
	}
}

// postForm posts a form to path as a same-origin browser would (with an Origin
// header), without following redirects.
func (b *bundle) postForm(t *testing.T, path string, form url.Values, origin string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.srv.URL+"/"+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	res, err := noRedirect.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	return res
}

// postJSON posts v as JSON to path with the token header tok (none if empty) and
// returns the status and body.
func (b *bundle) postJSON(t *testing.T, path string, v any, tok string, hdr ...string) (int, string) {
	t.Helper()
	body, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, b.srv.URL+"/"+path, strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if tok != "" {
		req.Header.Set("X-Console-Token", tok)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := noRedirect.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer func() { _ = res.Body.Close() }()
	out, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(out)
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// serve serves a GET of path by b's handler directly and returns the body,
// failing unless the status is 200.
func serve(t *testing.T, b *bundle, path string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	b.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s = %d %s", path, rec.Code, rec.Body)
	}
	return rec.Body.String()
}
