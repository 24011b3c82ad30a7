package browsertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// tabTimeout bounds everything a test does in its tab, so that a page that never
// shows what a test waits for fails the test instead of hanging it.
const tabTimeout = 60 * time.Second

// The shared browser: one headless Chromium for the whole test binary, a tab per
// test.
var browser struct {
	once    sync.Once
	err     error
	ctx     context.Context // the browser's first tab; new tabs open beside it
	cancel  func()          // closes the browser's first tab and the browser
	allocCx func()          // cancels the allocator and waits for the process
}

// chromiumPath is the browser to start: AX_CHROMIUM, else chromium on the PATH.
func chromiumPath() (string, error) {
	if p := os.Getenv("AX_CHROMIUM"); p != "" {
		return p, nil
	}
	p, err := exec.LookPath("chromium")
	if err != nil {
		return "", errors.New("no chromium on the PATH: run `bash scripts/ensure-chromium.sh` (or `make browser`) " +
			"from the repository root, or set AX_CHROMIUM to a Chromium or Chrome binary")
	}
	return p, nil
}

// startBrowser starts the shared browser once.
func startBrowser() error {
	browser.once.Do(func() {
		path, err := chromiumPath()
		if err != nil {
			browser.err = err
			return
		}
		opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
			chromedp.ExecPath(path),
			chromedp.WindowSize(1200, 800),
			// A container's /dev/shm is often 64 MB, too small for the renderer's
			// shared memory: Chromium writes those files to /tmp instead.
			chromedp.Flag("disable-dev-shm-usage", true), // chromedp's default too
			chromedp.Flag("hide-scrollbars", true),
		)
		if os.Geteuid() == 0 {
			// Chromium refuses to start its sandbox as root (CI containers run as
			// root); the pages it loads are the test's own.
			opts = append(opts, chromedp.NoSandbox)
		}
		allocCtx, allocCancel := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancel := chromedp.NewContext(allocCtx)
		if err := chromedp.Do(ctx); err != nil { // starts the browser
			cancel()
			allocCancel()
			browser.err = fmt.Errorf("starting %s: %w", path, err)
			return
		}
		browser.ctx, browser.cancel, browser.allocCx = ctx, cancel, allocCancel
	})
	return browser.err
}

// closeBrowser ends the shared browser, if it started, and waits for its process.
func closeBrowser() {
	if browser.cancel != nil {
		browser.cancel()
		browser.allocCx()
	}
}

// tab is a browser tab of a test, closed at the end of the test. It records the
// JavaScript dialogs (alert, confirm, prompt) that open in it, and dismisses them.
type tab struct {
	ctx     context.Context
	mu      sync.Mutex
	dialogs []string // the messages of the dialogs that opened
}

// newTab opens a tab of 1200 × 800 CSS pixels.
func newTab(t *testing.T) *tab {
	t.Helper()
	if err := startBrowser(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := chromedp.NewContext(browser.ctx)
	tb := &tab{ctx: ctx}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1200, 800)); err != nil { // opens the tab
		cancel()
		t.Fatalf("opening a tab: %v", err)
	}
	// Dialogs block the page: record each one and dismiss it.
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			tb.mu.Lock()
			tb.dialogs = append(tb.dialogs, string(ev.Type)+": "+ev.Message)
			tb.mu.Unlock()
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	// Everything the test does in the tab ends by tabTimeout.
	ctx, cancelTimeout := context.WithTimeout(ctx, tabTimeout)
	tb.ctx = ctx
	t.Cleanup(func() {
		cancelTimeout()
		cancel()
		<-done
	})
	return tb
}

// run runs actions in the tab and fails the test at the first error.
func (tb *tab) run(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(tb.ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates the JavaScript expression expr in the tab's page, waiting for
// the promise it returns, if any, and returns its value.
func eval[T any](t *testing.T, tb *tab, expr string) T {
	t.Helper()
	v, err := chromedp.Run(tb.ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// submit runs the actions, which submit a form or follow a link, and waits until
// the page they lead to (after redirects) loaded; it fails the test unless that
// page's status is want.
func (tb *tab) submit(t *testing.T, what string, want int64, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	res, err := chromedp.RunResponse(tb.ctx, actions...)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if res == nil || res.Status != want {
		t.Fatalf("%s: response %+v, want status %d", what, res, want)
	}
}

// click clicks the element sel (an XPath or a CSS selector) with the mouse. A
// page's live parts are replaced as the page refreshes them: when the element
// found was replaced before the click reached it, click finds it again.
func click(sel string) chromedp.Action[chromedp.Void] {
	c := chromedp.Click(sel)
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		for {
			v, err := c(ctx, t)
			if err == nil || ctx.Err() != nil || !staleNode(err) {
				return v, err
			}
		}
	}
}

// staleNode reports whether err is the browser's answer about a node that left
// the document.
func staleNode(err error) bool {
	for _, s := range []string{"Could not find node with given id", "Node is detached from document", "No node with given id found"} {
		if strings.Contains(err.Error(), s) {
			return true
		}
	}
	return false
}

// noDialogs fails the test if a dialog opened in the tab.
func (tb *tab) noDialogs(t *testing.T) {
	t.Helper()
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if len(tb.dialogs) > 0 {
		t.Errorf("dialogs opened: %s", strings.Join(tb.dialogs, "; "))
	}
}

// poll waits until the JavaScript expression expr is truthy in the page: the
// page evaluates it on every animation frame.
func poll(expr string) chromedp.Action[chromedp.Void] {
	p := chromedp.Poll[any](expr, chromedp.WithPollingTimeout(tabTimeout/2))
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		if _, err := p(ctx, t); err != nil {
			return chromedp.Void{}, fmt.Errorf("waiting for %s: %w", expr, err)
		}
		return chromedp.Void{}, nil
	}
}

// pollEvery waits until the JavaScript expression expr, which may return a
// promise (a fetch of the JSON API), is truthy, evaluating it every interval.
func pollEvery(expr string, interval time.Duration) chromedp.Action[chromedp.Void] {
	p := chromedp.Poll[any](expr, chromedp.WithPollingTimeout(tabTimeout/2), chromedp.WithPollingInterval(interval))
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		if _, err := p(ctx, t); err != nil {
			return chromedp.Void{}, fmt.Errorf("waiting for %s: %w", expr, err)
		}
		return chromedp.Void{}, nil
	}
}

// flashIs waits until the page's flash message (shown after an action's form) is msg.
func flashIs(msg string) chromedp.Action[chromedp.Void] {
	return poll(fmt.Sprintf(`document.querySelector('p.flash')?.textContent === %s`, jsString(msg)))
}

// jsString is s as a JavaScript string literal (JSON's, which JavaScript reads).
func jsString(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // a string always marshals
	}
	return string(b)
}
