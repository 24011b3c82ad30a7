package browsertest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/console"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/mysqlstore"
	"github.com/chromedp/chromedp"
)

// replicaEnv names the table TestReplicaProcess joins; the test runs only in the
// process TestTwoReplicas starts.
const replicaEnv = "AX_BROWSERTEST_REPLICA_TABLE"

// replicaLease is the kernels' Config.Lease: they publish their figures every
// fifth of it.
const replicaLease = 3 * time.Second

// replicaRow waits until the overview's replicas table has a row of owner whose
// cells satisfy the JavaScript condition cond (on an array c of the cells' texts,
// c[0] the owner's).
func replicaRow(owner, cond string) chromedp.Action[chromedp.Void] {
	return poll(fmt.Sprintf(`(() => {
		const row = document.querySelector('#replicas tr.replica[data-owner=' + CSS.escape(%s) + ']');
		if (row === null) return false;
		const c = [...row.children].map(x => x.textContent);
		return %s;
	})()`, jsString(owner), cond))
}

// TestReplicaProcess is the second replica of TestTwoReplicas, in a process of its
// own: a kernel named browser-2 on the table replicaEnv names, with three Low tasks
// queued behind a paused priority. It says "ready" on stdout once its kernel runs,
// and stops when its stdin closes.
func TestReplicaProcess(t *testing.T) {
	table := os.Getenv(replicaEnv)
	if table == "" {
		t.Skip("runs in the process TestTwoReplicas starts")
	}
	st, err := mysqlstore.Open(testDSN(), mysqlstore.Options{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	k, err := kernel.New(kernel.Config{Store: st, Owner: "browser-2", Lease: replicaLease})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k.Close() }()
	if err := k.Pause(kernel.Selector{Priority: kernel.Low}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := k.TrySubmit(kernel.Task{Priority: kernel.Low, Run: func(context.Context) error { return nil }}); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes it
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := k.Resume(kernel.Selector{Priority: kernel.Low}); err != nil {
		t.Error(err)
	}
	if err := k.Shutdown(ctx); err != nil { // leaves the store: the others forget it
		t.Error(err)
	}
}

// Two kernels in two processes on one MariaDB table: one replica's overview lists
// both, each with the figures it published, and forgets the other once it stopped.
func TestTwoReplicas(t *testing.T) {
	e := setup(t, kernel.Config{Owner: "browser-1", Lease: replicaLease}, console.Options{Interval: 100 * time.Millisecond}, nil)

	cmd := exec.Command(os.Args[0], "-test.run=^TestReplicaProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), replicaEnv+"="+e.table)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the second replica: %v", err)
	}
	exited := false
	t.Cleanup(func() {
		if !exited {
			_ = stdin.Close()
			_ = cmd.Wait()
		}
	})
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("the second replica said %q, %v; want ready", lines.Text(), lines.Err())
	}

	tb := newTab(t)
	tb.run(t, "both replicas on the overview", chromedp.Navigate(e.url),
		replicaRow("browser-1", `row.classList.contains('self') && c[0] === 'browser-1 (this one)'`),
		replicaRow("browser-2", `!row.classList.contains('self') && c[8] === '0 / 0 / 3'`))
	if n := eval[int](t, tb, `document.querySelectorAll('#replicas tr.replica').length`); n != 2 {
		t.Errorf("%d replicas listed, want 2", n)
	}
	epochs := eval[[]string](t, tb, `[...document.querySelectorAll('#replicas tr.replica')].map(r => r.dataset.epoch)`)
	if len(epochs) != 2 || epochs[0] == epochs[1] {
		t.Errorf("the replicas' epochs = %v, want two distinct", epochs)
	}

	// The second replica stops: it leaves the store, and the overview forgets it.
	if err := stdin.Close(); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(stdout)
	exited = true
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the second replica: %v\n%s", err, rest)
	}
	if !strings.Contains(string(rest), "PASS") {
		t.Errorf("the second replica's output: %s", rest)
	}
	tb.run(t, "the stopped replica leaves the overview",
		poll(`document.querySelector('#replicas tr.replica[data-owner="browser-2"]') === null`),
		replicaRow("browser-1", `true`))
	tb.noDialogs(t)
}
