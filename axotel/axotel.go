package axotel

import (
	"context"
	"errors"

	"github.com/axsched/ax/kernel"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the spans: the tracer New asks its
// TracerProvider for.
const ScopeName = "github.com/axsched/ax/axotel"

// Hooks traces a kernel's tasks (see the package doc). It implements [kernel.Hooks];
// set it as kernel.Config.Hooks. Safe for concurrent use; its zero value is not usable:
// make one with [New].
type Hooks struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

var _ kernel.Hooks = (*Hooks)(nil)

// New returns hooks that start spans with a tracer of tp and carry durable tasks'
// trace contexts with prop. A nil tp means otel.GetTracerProvider(), a nil prop
// otel.GetTextMapPropagator(), each read once, here. A prop that injects nothing (the
// global default, until otel.SetTextMapPropagator) leaves durable tasks without a
// creation context: use propagation.TraceContext{} or a composite holding it.
func New(tp trace.TracerProvider, prop propagation.TextMapPropagator) *Hooks {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if prop == nil {
		prop = otel.GetTextMapPropagator()
	}
	return &Hooks{tracer: tp.Tracer(ScopeName), prop: prop}
}

// Headers injects ctx's trace context (and whatever else prop carries) into the
// headers of a durable task. It returns nil when there is nothing to carry.
func (h *Hooks) Headers(ctx context.Context) map[string]string {
	c := propagation.MapCarrier{}
	h.prop.Inject(ctx, c)
	if len(c) == 0 {
		return nil
	}
	return c
}

// Attempt starts the span of one attempt (see the package doc) and returns the context
// that carries it and the function that ends it with the attempt's outcome.
func (h *Hooks) Attempt(ctx context.Context, a kernel.AttemptInfo) (context.Context, func(error)) {
	parent := ctx
	var creation trace.SpanContext
	if a.Headers != nil {
		ext := h.prop.Extract(ctx, propagation.MapCarrier(a.Headers))
		creation = trace.SpanContextFromContext(ext)
		if !trace.SpanContextFromContext(ctx).IsValid() {
			parent = ext
		}
	} else {
		creation = trace.SpanContextFromContext(ctx)
	}
	attrs := make([]attribute.KeyValue, 0, 9)
	attrs = append(attrs,
		attribute.String("messaging.system", "ax"),
		attribute.String("messaging.operation.type", "process"),
		attribute.String("messaging.operation.name", "process"),
		attribute.String("messaging.message.id", a.ID),
		attribute.String("ax.task.priority", a.Priority.String()),
		attribute.Int("ax.task.attempt", a.Attempt),
	)
	name := "process"
	if a.Kind != "" {
		name += " " + a.Kind
		attrs = append(attrs, attribute.String("messaging.destination.name", a.Kind), attribute.String("ax.task.kind", a.Kind))
	}
	if a.Group != "" {
		attrs = append(attrs, attribute.String("ax.task.group", a.Group))
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...)}
	if creation.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: creation}))
	}
	ctx, span := h.tracer.Start(parent, name, opts...)
	return ctx, func(err error) {
		o := Outcome(err)
		span.SetAttributes(attribute.String("ax.task.outcome", o))
		if err != nil {
			span.SetAttributes(attribute.String("error.type", o))
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// Outcome names what an attempt's error says happened, as the ax.task.outcome
// attribute does: "succeeded" (nil), "panicked" (a *kernel.PanicError), "timed_out"
// (context.DeadlineExceeded), "canceled" (context.Canceled), "rate_limited" (a
// *kernel.RateLimitedError) or "failed".
func Outcome(err error) string {
	var pe *kernel.PanicError
	var rl *kernel.RateLimitedError
	switch {
	case err == nil:
		return "succeeded"
	case errors.As(err, &pe):
		return "panicked"
	case errors.Is(err, context.DeadlineExceeded):
		return "timed_out"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, &rl):
		return "rate_limited"
	}
	return "failed"
}
