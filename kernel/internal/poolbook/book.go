package poolbook

import (
	"iter"
	"maps"

	"github.com/axsched/ax/queue"
	"github.com/axsched/ax/store"
)

// Follower is told which pool tasks a book follows: the owner's claimer reads
// their states from the store (durable.Owner).
type Follower interface {
	Follow(id string)
	Unfollow(id string)
}

// Book is the pool tasks one kernel follows, by ID, H being its handle. The zero
// Book is empty; set Owner before the first Follow. Not safe for concurrent use.
type Book[H comparable] struct {
	// Owner is told of every ID the book begins or stops following.
	Owner Follower

	followed map[string]H // until claimed or adopted here, or ended
	// early holds the pool tasks this kernel submitted and claimed before their
	// handles reached the loop, which starts each on arrival.
	early   map[string]store.StoredTask
	orphans map[string]H // handles whose submit's outcome is unknown, until a claim here
	// adoptQ holds, per level in FIFO order, the followed tasks that may be
	// adopted; entries of tasks no longer adoptable are skipped or compacted.
	adoptQ [queue.NumLevels][]H
}

// Follow begins following the pool task id on h, and tells the owner.
func (b *Book[H]) Follow(id string, h H) {
	if b.followed == nil {
		b.followed = make(map[string]H)
	}
	b.followed[id] = h
	b.Owner.Follow(id)
}

// Unfollow stops following id, and tells the owner.
func (b *Book[H]) Unfollow(id string) {
	delete(b.followed, id)
	b.Owner.Unfollow(id)
}

// Get returns the handle id is followed on, and whether it is followed.
func (b *Book[H]) Get(id string) (H, bool) {
	h, ok := b.followed[id]
	return h, ok
}

// Follows reports whether id is followed on h.
func (b *Book[H]) Follows(id string, h H) bool {
	g, ok := b.followed[id]
	return ok && g == h
}

// Len returns how many tasks are followed.
func (b *Book[H]) Len() int { return len(b.followed) }

// All yields the followed tasks, in no order; the loop body may Unfollow them.
func (b *Book[H]) All() iter.Seq2[string, H] { return maps.All(b.followed) }

// Early records a task claimed before its handle came; its handle starts it.
func (b *Book[H]) Early(t *store.StoredTask) {
	if b.early == nil {
		b.early = make(map[string]store.StoredTask)
	}
	b.early[t.ID] = *t
}

// ClaimedEarly reports whether the task id was claimed before its handle came.
func (b *Book[H]) ClaimedEarly(id string) bool {
	_, ok := b.early[id]
	return ok
}

// TakeEarly returns, and forgets, the claim of id that came before its handle.
func (b *Book[H]) TakeEarly(id string) (store.StoredTask, bool) {
	t, ok := b.early[id]
	if ok {
		delete(b.early, id)
	}
	return t, ok
}

// Orphan keeps h, whose submit's outcome is unknown, until a claim takes its task.
func (b *Book[H]) Orphan(id string, h H) {
	if b.orphans == nil {
		b.orphans = make(map[string]H)
	}
	b.orphans[id] = h
}

// TakeOrphan returns, and forgets, the orphan of id.
func (b *Book[H]) TakeOrphan(id string) (H, bool) {
	h, ok := b.orphans[id]
	if ok {
		delete(b.orphans, id)
	}
	return h, ok
}

// QueueAdopt queues the followed h, of level l, for adoption.
func (b *Book[H]) QueueAdopt(l queue.Level, h H) { b.adoptQ[l] = append(b.adoptQ[l], h) }

// AdoptWaiting returns how many entries wait for adoption, stale ones included.
func (b *Book[H]) AdoptWaiting() int {
	n := 0
	for l := range b.adoptQ {
		n += len(b.adoptQ[l])
	}
	return n
}

// CompactAdopt drops the adoption entries that ok refuses: tasks no longer
// adoptable.
func (b *Book[H]) CompactAdopt(ok func(H) bool) {
	for l := range b.adoptQ {
		aq := b.adoptQ[l]
		n := 0
		for _, h := range aq {
			if ok(h) {
				aq[n] = h
				n++
			}
		}
		clear(aq[n:])
		b.adoptQ[l] = aq[:n]
	}
}

// Adopt takes up to n entries off the adoption queues, each level's share by
// quotas ([SplitByQuotas], a level's share at most the entries it holds),
// oldest first, and calls adopt with each that ok accepts; the entries ok refuses
// on the way are dropped.
func (b *Book[H]) Adopt(n int, quotas [queue.NumLevels]int, ok func(H) bool, adopt func(H)) {
	var avail [queue.NumLevels]int
	for l := range avail {
		avail[l] = len(b.adoptQ[l])
	}
	take := SplitByQuotas(n, quotas, avail)
	var zero H
	for l := range take {
		aq := b.adoptQ[l]
		i := 0
		for ; i < len(aq) && take[l] > 0; i++ {
			h := aq[i]
			aq[i] = zero
			if !ok(h) {
				continue
			}
			take[l]--
			adopt(h)
		}
		b.adoptQ[l] = aq[i:]
	}
}

// SplitByQuotas shares n among the levels by quotas, each taking at most avail[l]:
// each level its share (rounded down), then what is left to the levels with more,
// High first. Some quota must be above zero (the kernel's each are, once
// defaulted).
func SplitByQuotas(n int, quotas, avail [queue.NumLevels]int) [queue.NumLevels]int {
	var take [queue.NumLevels]int
	total := 0
	for _, q := range quotas {
		total += q
	}
	left := n
	for l := range take {
		share := n
		if total > 0 {
			share = n * quotas[l] / total
		}
		take[l] = min(share, avail[l])
		left -= take[l]
	}
	for l := range take {
		more := min(left, avail[l]-take[l])
		take[l] += more
		left -= more
	}
	return take
}
