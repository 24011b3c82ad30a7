package axotel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/axsched/ax/axotel"
	"github.com/axsched/ax/kernel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// tracer is a tracer provider whose ended spans land in an in-memory exporter, and
// are signalled on ended.
type tracer struct {
	tp    *sdktrace.TracerProvider
	exp   *tracetest.InMemoryExporter
	ended chan sdktrace.ReadOnlySpan
}

// signal is a span processor that hands each ended span to a channel.
type signal struct{ ch chan sdktrace.ReadOnlySpan }

func (s signal) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (s signal) OnEnd(sp sdktrace.ReadOnlySpan)                  { s.ch <- sp }
func (s signal) Shutdown(context.Context) error                  { return nil }
func (s signal) ForceFlush(context.Context) error                { return nil }

func newTracer(t *testing.T) *tracer {
	tr := &tracer{exp: tracetest.NewInMemoryExporter(), ended: make(chan sdktrace.ReadOnlySpan, 100)}
	tr.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(tr.exp), sdktrace.WithSpanProcessor(signal{tr.ended}))
	t.Cleanup(func() { _ = tr.tp.Shutdown(context.Background()) })
	return tr
}

// next returns the next span that ends, failing the test after a while.
func (tr *tracer) next(t *testing.T) sdktrace.ReadOnlySpan {
	t.Helper()
	select {
	case sp := <-tr.ended:
		return sp
	case <-time.After(30 * time.Second):
		t.Fatal("timed out waiting for a span to end")
		return nil
	}
}

// attrs returns a span's attributes by key.
func attrs(sp sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range sp.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

func newKernel(t *testing.T, cfg kernel.Config) *kernel.Kernel {
	t.Helper()
	k, err := kernel.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	return k
}

// TestAttemptSpans: a task retried until its third attempt gets three process spans,
// each a child of the submitter's span and linked to it, with the messaging and task
// attributes, the outcome and, for the failed ones, an error status; spans its function
// starts are children of its attempt's span.
func TestAttemptSpans(t *testing.T) {
	tr := newTracer(t)
	k := newKernel(t, kernel.Config{
		Hooks:  axotel.New(tr.tp, propagation.TraceContext{}),
		Groups: map[string]kernel.GroupConfig{"hosts": {}},
	})
	ctx, submit := tr.tp.Tracer("test").Start(context.Background(), "submit")
	n := 0
	h, err := k.Submit(ctx, kernel.Task{
		ID: "t1", Priority: kernel.Low, Group: "hosts", Key: "a.example",
		Retry: &kernel.RetryPolicy{MaxAttempts: 3, BackoffFunc: func(int, error) time.Duration { return time.Millisecond }},
		Run: func(ctx context.Context) error {
			n++
			_, child := tr.tp.Tracer("test").Start(ctx, "work")
			child.End()
			if n < 3 {
				return errors.New("upstream said no")
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Wait(t.Context()); err != nil {
		t.Fatalf("Wait() = %v", err)
	}
	submit.End()
	sc := submit.SpanContext()
	var process, work []sdktrace.ReadOnlySpan
	for range 7 { // three attempts, three children, the submit span
		switch sp := tr.next(t); sp.Name() {
		case "process":
			process = append(process, sp)
		case "work":
			work = append(work, sp)
		}
	}
	if len(work) != 3 {
		t.Fatalf("%d work spans, want 3", len(work))
	}
	for i, w := range work {
		if i < len(process) && w.Parent().SpanID() != process[i].SpanContext().SpanID() {
			t.Errorf("work span %d: parent %s, want its attempt's span %s", i+1, w.Parent().SpanID(), process[i].SpanContext().SpanID())
		}
	}
	if len(process) != 3 {
		t.Fatalf("%d process spans, want 3", len(process))
	}
	for i, sp := range process {
		a := attrs(sp)
		outcome := "failed"
		if i == 2 {
			outcome = "succeeded"
		}
		checks := []struct {
			key  attribute.Key
			want attribute.Value
		}{
			{"messaging.system", attribute.StringValue("ax")},
			{"messaging.operation.type", attribute.StringValue("process")},
			{"messaging.operation.name", attribute.StringValue("process")},
			{"messaging.message.id", attribute.StringValue("t1")},
			{"ax.task.priority", attribute.StringValue("low")},
			{"ax.task.group", attribute.StringValue("hosts")},
			{"ax.task.attempt", attribute.IntValue(i + 1)},
			{"ax.task.outcome", attribute.StringValue(outcome)},
		}
		for _, c := range checks {
			if got := a[c.key]; got != c.want {
				t.Errorf("span %d: %s = %v, want %v", i+1, c.key, got.String(), c.want.String())
			}
		}
		if sp.SpanKind() != trace.SpanKindConsumer {
			t.Errorf("span %d: kind %v, want consumer", i+1, sp.SpanKind())
		}
		if sp.Parent().SpanID() != sc.SpanID() || sp.SpanContext().TraceID() != sc.TraceID() {
			t.Errorf("span %d: parent %v, want the submit span %v", i+1, sp.Parent(), sc)
		}
		if l := sp.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != sc.SpanID() {
			t.Errorf("span %d: links %v, want one to the submit span", i+1, l)
		}
		wantStatus := codes.Error
		if i == 2 {
			wantStatus = codes.Unset
		}
		if sp.Status().Code != wantStatus {
			t.Errorf("span %d: status %v, want %v", i+1, sp.Status(), wantStatus)
		}
		if wantStatus == codes.Error && (a["error.type"] != attribute.StringValue("failed") || len(sp.Events()) == 0) {
			t.Errorf("span %d: error.type %v, %d events; want failed and the error recorded", i+1, a["error.type"].String(), len(sp.Events()))
		}
	}
}
