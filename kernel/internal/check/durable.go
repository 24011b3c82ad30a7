package check

import (
	"fmt"
	"time"

	"github.com/axsched/ax/store"
)

// Durable is what [DurableTask] checks of a durable task (kernel.DurableTask): its
// fields, the length of its payload, and what the kernel's store allows.
type Durable struct {
	Kind, UniqueKey, Group, Key string
	Priority                    store.Priority
	Delay, Timeout              time.Duration
	At                          time.Time
	MaxAttempts                 int
	Pool                        bool
	Payload                     int  // the payload's length
	MaxPayload                  int  // the store's cap on payloads, 0 if none is known
	Shared                      bool // the store is a store.SharedStore
}

// DurableTask records the bad fields of d, each named after e.Prefix. A payload over
// the store's cap is an error wrapping store.ErrPayloadTooLarge.
func DurableTask(e *Errs, d Durable) {
	if d.Kind == "" {
		e.Bad("Kind", d.Kind, "must not be empty")
	}
	Bytes(e, "Kind", d.Kind, store.KindMax, "KindMax")
	if !d.Priority.Valid() {
		e.Bad("Priority", d.Priority, "must be High, Normal or Low")
	}
	NonNeg(e, "Delay", d.Delay)
	if d.Delay > 0 && !d.At.IsZero() {
		e.Bad("At", d.At.Round(0), "must be zero when Delay is set")
	}
	NonNeg(e, "Timeout", d.Timeout)
	NonNeg(e, "MaxAttempts", d.MaxAttempts)
	Bytes(e, "UniqueKey", d.UniqueKey, store.UniqueKeyMax, "UniqueKeyMax")
	if d.Key != "" && d.Group == "" {
		e.Bad("Key", d.Key, "needs a DurableTask.Group")
	}
	Bytes(e, "Key", d.Key, store.GroupKeyMax, "GroupKeyMax")
	if d.Pool && !d.Shared {
		e.Bad("Pool", d.Pool, "needs a Config.Store that is a SharedStore")
	}
	if d.MaxPayload > 0 && d.Payload > d.MaxPayload {
		e.Add(fmt.Errorf("kernel: %sPayload: %d bytes, the store takes at most %d: %w", e.Prefix, d.Payload, d.MaxPayload, store.ErrPayloadTooLarge))
	}
}
