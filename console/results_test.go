package console

import (
	"context"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/axsched/ax/store"
)

// TestTaskResultAndAttempts stores tasks whose result, attempt errors and owners
// are hostile strings: the task's page shows the attempts in order and the result
// (text, or hex when it is not UTF-8), escaped, and the JSON API returns them.
func TestTaskResultAndAttempts(t *testing.T) {
	tb := setupTasks(t, Options{Payloads: true})
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	for i, s := range hostile {
		id := "t" + string(rune('a'+i))
		changes := []store.Change{
			{Op: store.OpInsert, Task: store.StoredTask{ID: id, Kind: "k", State: store.Queued, Fence: 1, UpdatedAt: now}},
			{Op: store.OpStart, Fence: 1, Task: store.StoredTask{ID: id, Fence: 2, Attempt: 1, UpdatedAt: now}},
			{
				Op: store.OpRetry, Fence: 2, Attempt: store.Attempt{Number: 1, Start: now, End: now.Add(time.Second), Outcome: store.Failed, Error: "first: " + s, Owner: s},
				Task: store.StoredTask{ID: id, RunAt: now, LastError: "first: " + s, UpdatedAt: now.Add(time.Second)},
			},
			{Op: store.OpStart, Fence: 2, Task: store.StoredTask{ID: id, Fence: 3, Attempt: 2, UpdatedAt: now.Add(2 * time.Second)}},
			{
				Op: store.OpSucceed, Fence: 3, Attempt: store.Attempt{Number: 2, Start: now.Add(2 * time.Second), End: now.Add(3 * time.Second), Outcome: store.Succeeded, Owner: "second-owner"},
				Task: store.StoredTask{ID: id, Result: []byte(s), UpdatedAt: now.Add(3 * time.Second)},
			},
		}
		res, err := tb.st.Commit(ctx, changes)
		if err != nil {
			t.Fatal(err)
		}
		for j, e := range res {
			if e != nil {
				t.Fatalf("Commit: results[%d] = %v", j, e)
			}
		}
		_, body := tb.get(t, "task?id="+url.QueryEscape(id))
		want := []string{"first: " + s, s}
		if !utf8.ValidString(s) {
			want = []string{"first: " + s, hex.EncodeToString([]byte(s))}
		}
		checkHTML(t, "task "+id, body, want)
		first, second := strings.Index(body, "first: "), strings.Index(body, "second-owner")
		if first < 0 || second < first {
			t.Errorf("task %s: attempt 1 at %d, attempt 2 at %d in the page, want both, in order", id, first, second)
		}
		var d taskData
		tb.getJSON(t, "api/v1/tasks/"+url.PathEscape(id), &d)
		if len(d.Attempts) != 2 || d.Attempts[0].Number != 1 || d.Attempts[0].Outcome != "failed" || d.Attempts[0].Error != asJSON("first: "+s) ||
			d.Attempts[1].Number != 2 || d.Attempts[1].Outcome != "succeeded" || d.ResultSize != len(s) {
			t.Errorf("api/v1/tasks/%s = %+v, want the two attempts in order and a result of %d bytes", id, d, len(s))
		}
		if utf8.ValidString(s) && (d.Result != s || d.ResultEncoding != "text") || !utf8.ValidString(s) && d.ResultEncoding != "hex" {
			t.Errorf("api/v1/tasks/%s: result %q (%s), want %q as text, or hex when not UTF-8", id, d.Result, d.ResultEncoding, s)
		}
	}

	// Without Options.Payloads, the result's size only.
	tb2 := setupTasks(t, Options{})
	big := make([]byte, 3000)
	for i := range big {
		big[i] = 'r'
	}
	if _, err := tb2.st.Commit(ctx, []store.Change{
		{Op: store.OpInsert, Task: store.StoredTask{ID: "x", Kind: "k", State: store.Running, Attempt: 1, Fence: 1, UpdatedAt: now}},
		{Op: store.OpSucceed, Fence: 1, Task: store.StoredTask{ID: "x", Result: big, UpdatedAt: now}},
	}); err != nil {
		t.Fatal(err)
	}
	var d taskData
	tb2.getJSON(t, "api/v1/tasks/x", &d)
	if d.ResultSize != len(big) || d.Result != "" {
		t.Errorf("without Payloads: result_size %d, result %q; want %d and no preview", d.ResultSize, d.Result, len(big))
	}
}
