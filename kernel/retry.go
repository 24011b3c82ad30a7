package kernel

import (
	"time"

	"github.com/axsched/ax/internal/retries"
)

// DefaultBackoff is the delay before retry number n (1 for the first retry) under
// policy p: Base × Multiplier^(n-1), capped at Max, then jittered per p.Jitter.
// p's zero fields take their defaults. The result is in [0, Max] for every policy
// that validates, however large its fields: the growth is computed in floating
// point and capped before it becomes a Duration.
func DefaultBackoff(p RetryPolicy, n int) time.Duration {
	p = p.withDefaults()
	return retries.Backoff(p.Base, p.Multiplier, p.Max, int(p.Jitter), n)
}

// backoff is the delay before the retry that follows attempt n. A BackoffFunc's
// negative answer means no delay. The loop waits for a BackoffFunc, which runs on
// a goroutine of its own (callGuarded) so that neither a panic nor a
// runtime.Goexit in it ends the loop; either one is counted in
// Stats.CallbackPanics and gets the default rule's delay instead.
func (k *Kernel) backoff(p *RetryPolicy, n int, err error) time.Duration {
	if p.BackoffFunc != nil {
		var d time.Duration
		if _, ok := callGuarded(k, func() { d = p.BackoffFunc(n, err) }); ok {
			return max(d, 0)
		}
		k.m.callbackPanics.Inc()
	}
	return DefaultBackoff(*p, n)
}

// retryRefused counts and reports a retry of h the budget refused after attempt a
// failed with err. Loop only.
func (k *Kernel) retryRefused(h *Handle, a *attempt, err error) {
	k.m.retriesRefused[h.bucket].Inc()
	if k.events != nil {
		k.emit(h, 0, 0, a, err)
		k.ls.evBuf[len(k.ls.evBuf)-1].Note = NoteRetryRefused
	}
}

// retryDue decides a durable retry the budget refused (attempt.budgetWait) that
// came due: it goes on if the budget allows it now, and otherwise waits in the
// wheel, Retrying, until the window next slides. Loop only.
func (k *Kernel) retryDue(a *attempt) bool {
	if k.ls.budget.Allow(k.ls.now) {
		a.budgetWait = false
		return true
	}
	k.schedule(a, timerDue, k.ls.budget.Refill(k.ls.now, k.ls.now))
	k.ls.delayed[a.h.ticket()]++
	return false
}
