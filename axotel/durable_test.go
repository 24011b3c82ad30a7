package axotel_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/axsched/ax/axotel"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/mysqlstore"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// dsnDefault is the database the tests use unless AX_MYSQL_DSN names another.
const dsnDefault = "root@tcp(127.0.0.1:3306)/test"

func testDSN() string {
	if dsn := os.Getenv("AX_MYSQL_DSN"); dsn != "" {
		return dsn
	}
	return dsnDefault
}

// openStore opens a store on table (dropped first when fresh, and at the end of the
// test), closed at the end of the test.
func openStore(t *testing.T, table string, fresh bool) *mysqlstore.Store {
	t.Helper()
	s, err := mysqlstore.Open(testDSN(), mysqlstore.Options{Table: table, Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	if fresh {
		if err := s.Drop(ctx); err != nil {
			t.Fatalf("no MariaDB at AX_MYSQL_DSN (default %s)? %v: run scripts/ensure-mariadb.sh", dsnDefault, err)
		}
		t.Cleanup(func() {
			if err := s.Drop(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// nextProcess returns the next process span that ends.
func (tr *tracer) nextProcess(t *testing.T) sdktrace.ReadOnlySpan {
	t.Helper()
	for {
		if sp := tr.next(t); sp.SpanKind() == trace.SpanKindConsumer {
			return sp
		}
	}
}

// TestDurableTraceAfterRestart: a durable task submitted under a span in kernel A,
// whose attempt A's Close interrupts, runs its next attempt in kernel B, opened later
// on the same table with tracing of its own: B's span continues the submitter's trace
// (its remote parent and its link are the submit span, read from the stored headers).
func TestDurableTraceAfterRestart(t *testing.T) {
	table := fmt.Sprintf("axotel_restart_%d", os.Getpid()%100000)
	trA, trB := newTracer(t), newTracer(t)
	stA := openStore(t, table, true)
	kA, err := kernel.New(kernel.Config{Store: stA, Hooks: axotel.New(trA.tp, propagation.TraceContext{})})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{}, 1)
	if err := kA.Register("mail", func(ctx context.Context, _ []byte) error {
		started <- struct{}{}
		<-ctx.Done() // until A closes
		return ctx.Err()
	}); err != nil {
		t.Fatal(err)
	}
	ctx, submit := trA.tp.Tracer("test").Start(context.Background(), "signup")
	h, err := kA.SubmitDurable(ctx, kernel.DurableTask{Kind: "mail", Payload: []byte("welcome")})
	if err != nil {
		t.Fatal(err)
	}
	submit.End()
	sc := submit.SpanContext()
	<-started
	if err := kA.Close(); err != nil {
		t.Fatal(err)
	}
	spA := trA.nextProcess(t)
	if a := attrs(spA); spA.SpanContext().TraceID() != sc.TraceID() || a["ax.task.attempt"] != attribute.IntValue(1) ||
		a["ax.task.outcome"] != attribute.StringValue("canceled") {
		t.Errorf("A's span: trace %s, attributes %v; want trace %s, attempt 1, canceled", spA.SpanContext().TraceID(), spA.Attributes(), sc.TraceID())
	}

	stB := openStore(t, table, false)
	kB, err := kernel.New(kernel.Config{Store: stB, Hooks: axotel.New(trB.tp, propagation.TraceContext{})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kB.Close() })
	ran := make(chan []byte, 1)
	if err := kB.Register("mail", func(_ context.Context, p []byte) error { ran <- p; return nil }); err != nil {
		t.Fatal(err)
	}
	if p := <-ran; string(p) != "welcome" {
		t.Fatalf("B ran payload %q", p)
	}
	sp := trB.nextProcess(t)
	a := attrs(sp)
	if sp.Name() != "process mail" || a["messaging.destination.name"] != attribute.StringValue("mail") ||
		a["ax.task.kind"] != attribute.StringValue("mail") || a["messaging.message.id"] != attribute.StringValue(h.ID()) {
		t.Errorf("B's span %q: attributes %v", sp.Name(), sp.Attributes())
	}
	if a["ax.task.attempt"] != attribute.IntValue(2) || a["ax.task.outcome"] != attribute.StringValue("succeeded") {
		t.Errorf("B's span: attempt %v, outcome %v; want 2, succeeded", a["ax.task.attempt"].String(), a["ax.task.outcome"].String())
	}
	if sp.SpanContext().TraceID() != sc.TraceID() || sp.Parent().SpanID() != sc.SpanID() || !sp.Parent().IsRemote() {
		t.Errorf("B's span: trace %s parent %s (remote %v); want trace %s, the submit span %s as remote parent",
			sp.SpanContext().TraceID(), sp.Parent().SpanID(), sp.Parent().IsRemote(), sc.TraceID(), sc.SpanID())
	}
	if l := sp.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != sc.SpanID() || l[0].SpanContext.TraceID() != sc.TraceID() {
		t.Errorf("B's span: links %v, want one to the submit span", l)
	}
}
