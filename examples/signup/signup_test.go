package signup_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/examples/signup"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store/storekit"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// advance moves the bubble's fake clock by d: the test's goroutine waits on a timer,
// and once every goroutine of the bubble is blocked the clock jumps to it.
func advance(d time.Duration) { <-time.After(d) }

// sent is one mail a fakeMailer sent, and when (in the bubble's time).
type sent struct {
	to, subject string
	at          time.Time
}

// fakeMailer records the mails it sends; it fails the first failFirst calls.
type fakeMailer struct {
	mu        sync.Mutex
	failFirst int
	calls     int
	sent      []sent
}

func (m *fakeMailer) Send(_ context.Context, to, subject string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if m.calls <= m.failFirst {
		return errors.New("smtp: 421 try again later")
	}
	m.sent = append(m.sent, sent{to, subject, time.Now()})
	return nil
}

func (m *fakeMailer) mails() []sent {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.sent)
}

// newKernel starts a kernel on st with the invoice handler, which records the
// emails it bills in billed; t's cleanup closes it.
func newKernel(t *testing.T, st *storekit.MemoryStore, cfg kernel.Config, billed chan<- string) *kernel.Kernel {
	t.Helper()
	cfg.Store = st
	k, err := kernel.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	if err := signup.Register(k, func(_ context.Context, email string) error {
		billed <- email
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSignUpSendsWelcomeThenReminder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		billed := make(chan string, 1)
		k := newKernel(t, storekit.NewMemoryStore(), kernel.Config{}, billed)
		m := &fakeMailer{}
		s := &signup.Service{K: k, Mailer: m}
		start := time.Now()

		if err := s.SignUp(t.Context(), "ada@example.com"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // every goroutine of the bubble is blocked: what can run has run
		if got := m.mails(); len(got) != 1 || got[0].subject != "welcome" || !got[0].at.Equal(start) {
			t.Fatalf("after SignUp: mails = %v, want the welcome mail at once", got)
		}
		if got := <-billed; got != "ada@example.com" {
			t.Fatalf("billed %q, want ada@example.com", got)
		}

		advance(signup.ReminderAfter) // the bubble's clock jumps a day at once
		synctest.Wait()
		got := m.mails()
		if len(got) != 2 || got[1].subject != "reminder" || got[1].at.Sub(start) != signup.ReminderAfter {
			t.Fatalf("a day later: mails = %v, want the reminder %v after the sign-up", got, signup.ReminderAfter)
		}
	})
}

func TestSignUpRetriesAFailedMail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		billed := make(chan string, 1)
		k := newKernel(t, storekit.NewMemoryStore(), kernel.Config{}, billed)
		m := &fakeMailer{failFirst: 1}
		s := &signup.Service{K: k, Mailer: m}

		if err := s.SignUp(t.Context(), "ada@example.com"); err != nil {
			t.Fatal(err)
		}
		advance(time.Minute) // past the retry's backoff
		synctest.Wait()
		if got := m.mails(); len(got) != 1 || got[0].subject != "welcome" {
			t.Fatalf("mails = %v, want the welcome mail sent by the retry", got)
		}
		<-billed
	})
}

func TestSignUpSubmits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu      sync.Mutex
			entered = map[string]kernel.State{} // task ID -> the state it entered the kernel in
		)
		record := func(ev kernel.Event) {
			if ev.From == 0 && ev.Note == 0 {
				mu.Lock()
				entered[ev.TaskID] = ev.To
				mu.Unlock()
			}
		}
		billed := make(chan string, 1)
		k := newKernel(t, storekit.NewMemoryStore(), kernel.Config{OnEvent: record}, billed)
		s := &signup.Service{K: k, Mailer: &fakeMailer{}}

		if err := s.SignUp(t.Context(), "ada@example.com"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if entered["welcome:ada@example.com"] != kernel.Queued || entered["reminder:ada@example.com"] != kernel.Delayed {
			t.Fatalf("tasks entered as %v, want the welcome Queued and the reminder Delayed", entered)
		}
		<-billed
	})
}

func TestInvoiceSurvivesARestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := storekit.NewMemoryStore() // one store for both processes, as a database would be
		stuck := make(chan string, 1)
		first, err := kernel.New(kernel.Config{Store: st})
		if err != nil {
			t.Fatal(err)
		}
		// The first process stops while billing: its handler waits until Close
		// cancels it, and the task stays in the store.
		if err := signup.Register(first, func(ctx context.Context, email string) error {
			stuck <- email
			<-ctx.Done()
			return ctx.Err()
		}); err != nil {
			t.Fatal(err)
		}
		if err := (&signup.Service{K: first, Mailer: &fakeMailer{}}).SignUp(t.Context(), "ada@example.com"); err != nil {
			t.Fatal(err)
		}
		<-stuck
		if err := first.Close(); err != nil {
			t.Fatal(err)
		}

		billed := make(chan string, 1)
		newKernel(t, st, kernel.Config{}, billed) // the restarted process
		if got := <-billed; got != "ada@example.com" {
			t.Fatalf("after the restart billed %q, want ada@example.com", got)
		}
	})
}
