package browsertest

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/axsched/ax/console"
	"github.com/axsched/ax/internal/axtest"
	"github.com/axsched/ax/kernel"
	"github.com/chromedp/chromedp"
)

// groupCell waits until the cell of column col (0 is the group's name) in the
// Groups page's row of group reads want.
func groupCell(group string, col int, want string) chromedp.Action[chromedp.Void] {
	return poll(fmt.Sprintf(`(() => {
		const row = [...document.querySelectorAll('#groups tbody tr')].find(r => r.querySelector('th')?.textContent === %s);
		return row !== undefined && row.children[%d].textContent === %s;
	})()`, jsString(group), col, jsString(want)))
}

// groupButton is the XPath of the button of group's row that posts to action
// ("pause" or "resume").
func groupButton(group, action string) string {
	return fmt.Sprintf(`//table[@id="groups"]//tr[th=%s]//form[@action="api/v1/%s"]/button`, strconv.Quote(group), action)
}

// The operator pauses a group from the Groups page: durable tasks submitted to it
// wait, and the page shows its queue grow; resumed from the page, they run and the
// queue drains.
func TestGroupPauseResume(t *testing.T) {
	const n = 6
	ran := make(chan string, n)
	e := setup(t, kernel.Config{
		MaxConcurrency: 4,
		Groups:         map[string]kernel.GroupConfig{"upstream": {PerKey: kernel.Limits{Concurrency: 1}}, "mail": {}},
	}, console.Options{Actions: true, Interval: 100 * time.Millisecond}, func(k *kernel.Kernel) {
		if err := k.Register("browser.call", func(_ context.Context, payload []byte) error {
			ran <- string(payload)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
	tb := newTab(t)
	tb.run(t, "open the Groups page", chromedp.Navigate(e.url+"groups"), groupCell("upstream", 1, "running"))

	tb.submit(t, "click Pause of upstream", 200, click(groupButton("upstream", "pause")))
	tb.run(t, "the page after the pause", flashIs("Paused."), groupCell("upstream", 1, "paused"), groupCell("mail", 1, "running"))
	if g := e.k.Stats().Groups["upstream"]; !g.Paused {
		t.Fatalf("Stats().Groups[upstream] = %+v after the click, want Paused", g)
	}

	ctx := context.Background()
	for i := range n {
		if _, err := e.k.SubmitDurable(ctx, kernel.DurableTask{
			Kind: "browser.call", Payload: []byte("call-" + strconv.Itoa(i)), Group: "upstream", Key: "host-" + strconv.Itoa(i%3),
		}); err != nil {
			t.Fatalf("SubmitDurable %d: %v", i, err)
		}
	}
	// The page refreshes itself: the queue it shows grows to n, none running.
	tb.run(t, "the paused group's queue on the page", groupCell("upstream", 2, strconv.Itoa(n)), groupCell("upstream", 3, "0"))
	select {
	case p := <-ran:
		t.Fatalf("task %s ran while its group was paused", p)
	default:
	}

	tb.submit(t, "click Resume of upstream", 200, click(groupButton("upstream", "resume")))
	tb.run(t, "the page after the resume", flashIs("Resumed."))
	seen := map[string]bool{}
	for range n {
		seen[axtest.WaitOrTimeout(t, ran, "a task of the resumed group")] = true
	}
	if len(seen) != n {
		t.Errorf("ran %d distinct tasks, want %d", len(seen), n)
	}
	tb.run(t, "the drained queue on the page", groupCell("upstream", 1, "running"), groupCell("upstream", 2, "0"))
	tb.noDialogs(t)
}
