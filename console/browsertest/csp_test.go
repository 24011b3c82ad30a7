package browsertest

import (
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/console"
	"github.com/axsched/ax/kernel"
	"github.com/chromedp/chromedp"
)

// The console's Content-Security-Policy lets its own script run and blocks a
// script injected into the page: an inline script element, an inline event
// handler and a javascript: URL. The browser reports each refusal as a
// securitypolicyviolation event and in its console.
func TestContentSecurityPolicy(t *testing.T) {
	e := setup(t, kernel.Config{}, console.Options{Interval: 100 * time.Millisecond}, nil)
	tb := newTab(t)
	messages := chromedp.Console(tb.ctx)

	res, err := chromedp.Run(tb.ctx, chromedp.NavigateResponse(e.url))
	if err != nil {
		t.Fatalf("open the overview: %v", err)
	}
	if csp := res.Headers["Content-Security-Policy"]; csp == nil || !strings.Contains(csp.(string), "script-src 'self'") {
		t.Fatalf("Content-Security-Policy = %v, want script-src 'self'", csp)
	}

	// The console's own script (static/console.js) runs: it swaps in the live parts
	// of the page as it refreshes them.
	tb.run(t, "the page's own script refreshes it",
		chromedp.Evaluate[chromedp.Void](`document.querySelectorAll('[data-live]').forEach(el => el.dataset.stale = '1')`),
		poll(`document.querySelector('[data-live]:not([data-stale])') !== null`))

	eval[bool](t, tb, `(() => {
		window.violations = [];
		document.addEventListener('securitypolicyviolation', e => window.violations.push(e.violatedDirective + ' ' + e.blockedURI));
		const s = document.createElement('script');
		s.textContent = 'window.ranScript = true';
		document.body.appendChild(s);
		const d = document.createElement('div');
		d.innerHTML = '<button id="injected" onclick="window.ranHandler = true">x</button>';
		document.body.appendChild(d);
		document.getElementById('injected').click();
		const a = document.createElement('a');
		a.href = 'javascript:window.ranURL = true';
		document.body.appendChild(a);
		a.click();
		return true;
	})()`)
	tb.run(t, "three violations", poll(`window.violations.length >= 3`))
	got := eval[[]string](t, tb, `[window.ranScript, window.ranHandler, window.ranURL].map(String).concat(window.violations)`)
	if got[0] != "undefined" || got[1] != "undefined" || got[2] != "undefined" {
		t.Errorf("the injected script, handler and URL ran: %v", got[:3])
	}
	for _, v := range got[3:] {
		if !strings.HasPrefix(v, "script-src") {
			t.Errorf("violation %q, want of script-src", v)
		}
	}

	// The browser says why in its console.
	for m, err := range messages {
		if err != nil {
			t.Fatalf("reading the console: %v", err)
		}
		if m.Type == chromedp.ConsoleError && strings.Contains(m.Text, "Content Security Policy") {
			break
		}
	}
	tb.noDialogs(t)
}
