package axotel_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/axsched/ax/axotel"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/mysqlstore"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// childEnv names the table of the child process of TestDurableTraceAfterKill.
const childEnv = "AXOTEL_TEST_CHILD_TABLE"

// child is the process TestDurableTraceAfterKill kills: it submits a durable task
// under a span on table, prints the span's trace and span IDs once the task's first
// attempt runs, and waits to be killed.
func child(table string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	st, err := mysqlstore.Open(testDSN(), mysqlstore.Options{Table: table, Retention: -1})
	if err != nil {
		fail(err)
	}
	tp := sdktrace.NewTracerProvider()
	k, err := kernel.New(kernel.Config{Store: st, Hooks: axotel.New(tp, propagation.TraceContext{})})
	if err != nil {
		fail(err)
	}
	started := make(chan struct{})
	if err := k.Register("mail", func(ctx context.Context, _ []byte) error {
		close(started)
		select {} // the attempt the kill interrupts
	}); err != nil {
		fail(err)
	}
	ctx, span := tp.Tracer("child").Start(context.Background(), "signup")
	if _, err := k.SubmitDurable(ctx, kernel.DurableTask{Kind: "mail", Payload: []byte("welcome")}); err != nil {
		fail(err)
	}
	span.End()
	<-started
	fmt.Println(span.SpanContext().TraceID(), span.SpanContext().SpanID())
	select {}
}

// TestDurableTraceAfterKill: a process submits a durable task under a span and is
// killed (SIGKILL) during its first attempt; a kernel started after it on the same
// table runs the second attempt, whose span continues the dead process's trace.
func TestDurableTraceAfterKill(t *testing.T) {
	table := fmt.Sprintf("axotel_kill_%d", os.Getpid()%100000)
	openStore(t, table, true)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+table)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the child printed no IDs: %v", err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	ids := strings.Fields(line)
	if len(ids) != 2 {
		t.Fatalf("the child printed %q, want a trace ID and a span ID", line)
	}

	tr := newTracer(t)
	st := openStore(t, table, false)
	k, err := kernel.New(kernel.Config{Store: st, Hooks: axotel.New(tr.tp, propagation.TraceContext{})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	ran := make(chan struct{})
	if err := k.Register("mail", func(context.Context, []byte) error { close(ran); return nil }); err != nil {
		t.Fatal(err)
	}
	<-ran
	sp := tr.nextProcess(t)
	a := attrs(sp)
	if sp.SpanContext().TraceID().String() != ids[0] || sp.Parent().SpanID().String() != ids[1] || !sp.Parent().IsRemote() {
		t.Errorf("span after the kill: trace %s parent %s (remote %v); want trace %s, the child's submit span %s as remote parent",
			sp.SpanContext().TraceID(), sp.Parent().SpanID(), sp.Parent().IsRemote(), ids[0], ids[1])
	}
	if l := sp.Links(); len(l) != 1 || l[0].SpanContext.SpanID().String() != ids[1] {
		t.Errorf("span after the kill: links %v, want one to the child's submit span", l)
	}
	if a["ax.task.attempt"] != attribute.IntValue(2) || a["ax.task.outcome"] != attribute.StringValue("succeeded") {
		t.Errorf("span after the kill: attempt %s, outcome %s; want 2, succeeded", a["ax.task.attempt"].String(), a["ax.task.outcome"].String())
	}
}
