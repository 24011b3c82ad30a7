// Package axotel traces ax's tasks with OpenTelemetry: a span per attempt, following
// the messaging semantic conventions (a process span of kind consumer, linked to the
// span that submitted the task), for in-memory and durable tasks alike. The trace
// context of a durable task is stored with it, so an attempt after a restart, a rescue
// or a claim by another replica continues the submitter's trace.
//
// Enable it with [New] as the kernel's Config.Hooks:
//
//	k, err := kernel.New(kernel.Config{
//		Store: st,
//		Hooks: axotel.New(otel.GetTracerProvider(), otel.GetTextMapPropagator()),
//	})
//
// # Spans
//
// Each attempt gets a span named "process <kind>" ("process" for an in-memory task) of
// kind [trace.SpanKindConsumer], started on the executor just before the task's
// function runs and ended once it returned; the function's context carries it, so the
// spans the function starts are its children. Its attributes:
//
//	messaging.system            "ax"
//	messaging.operation.type    "process"
//	messaging.operation.name    "process"
//	messaging.message.id        the task's ID
//	messaging.destination.name  the durable task's kind (durable tasks only)
//	ax.task.priority            "high", "normal" or "low"
//	ax.task.attempt             the attempt's number, 1 for the first
//	ax.task.kind                the durable task's kind (durable tasks only)
//	ax.task.group               the task's group (tasks of a group only)
//	ax.task.outcome             "succeeded", "failed", "panicked", "timed_out",
//	                            "canceled" or "rate_limited"
//	error.type                  the outcome, when the attempt did not succeed
//
// An attempt that did not succeed records its error and has the status Error. A task
// retried three times has three spans.
//
// # Parent and link
//
// The submitter's span is the creation context. Every attempt's span links to it. When
// the attempt's context has no span of its own, the span is also the creation
// context's child, so that the whole task is one trace: an in-memory task's attempt
// context carries the submitter's values (Task.Values, or Submit's ctx), and with them
// its span, which is then the parent; a durable task's creation context comes from the
// headers stored with it (kernel.Hooks.Headers, injected with the propagator at
// SubmitDurable), which makes it the (remote) parent in whichever process runs it. A
// task submitted with no span in its context (TryGo, Go without Task.Values) starts a
// trace of its own.
//
// # Metrics
//
// Metrics stay on the kernel's Prometheus families (Kernel.WritePrometheus,
// docs/operations.md); docs/otel.md shows how an OpenTelemetry Collector scrapes them
// with its prometheus receiver.
package axotel
