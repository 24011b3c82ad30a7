// Package signup is the code under test of docs/testing.md: a service that, on
// each sign-up, sends a welcome mail at once, a reminder a day later, and stores
// a durable invoice task that survives a restart.
package signup

import (
	"context"
	"time"

	"github.com/axsched/ax/kernel"
)

// KindInvoice is the durable kind of the invoice task; its payload is the email.
const KindInvoice = "signup.invoice"

// ReminderAfter is how long after a sign-up the reminder is sent.
const ReminderAfter = 24 * time.Hour

// Mailer sends one mail.
type Mailer interface {
	Send(ctx context.Context, to, subject string) error
}

// Service signs users up. K must have KindInvoice registered (see Register).
type Service struct {
	K      *kernel.Kernel
	Mailer Mailer
}

// Register registers the invoice handler, which bill calls for each email.
func Register(k *kernel.Kernel, bill func(ctx context.Context, email string) error) error {
	return k.Register(KindInvoice, func(ctx context.Context, payload []byte) error {
		return bill(ctx, string(payload))
	})
}

// SignUp submits the sign-up's three tasks and returns once the kernel accepted
// them; they run later.
func (s *Service) SignUp(ctx context.Context, email string) error {
	retry := &kernel.RetryPolicy{MaxAttempts: 3}
	if _, err := s.K.Submit(ctx, kernel.Task{
		ID:    "welcome:" + email,
		Retry: retry,
		Run:   func(ctx context.Context) error { return s.Mailer.Send(ctx, email, "welcome") },
	}); err != nil {
		return err
	}
	if _, err := s.K.Submit(ctx, kernel.Task{
		ID:    "reminder:" + email,
		Delay: ReminderAfter,
		Retry: retry,
		Run:   func(ctx context.Context) error { return s.Mailer.Send(ctx, email, "reminder") },
	}); err != nil {
		return err
	}
	_, err := s.K.SubmitDurable(ctx, kernel.DurableTask{Kind: KindInvoice, Payload: []byte(email), UniqueKey: "invoice:" + email})
	return err
}
