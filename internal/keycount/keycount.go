// Package keycount counts, per key, what many goroutines add and take off: a map
// split in shards, each behind its own lock, so that submitters of different keys
// seldom meet. Keys at zero are deleted, so the maps hold only the keys counted.
// The kernel counts with it the tasks of a group's key submitted and not yet
// started (GroupConfig.MaxWaiting).
package keycount

import (
	"hash/maphash"
	"sync"
)

// shards is the number of shards; a power of two.
const shards = 16

// Counts is a count per key. Its methods are safe for concurrent use. Make one
// with New.
type Counts struct {
	seed   maphash.Seed
	shards [shards]struct {
		mu sync.Mutex
		m  map[string]int32
		_  [40]byte // a shard to a cache line
	}
}

// New returns counts at zero for every key.
func New() *Counts {
	c := &Counts{seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].m = make(map[string]int32)
	}
	return c
}

// Add counts n more of key if the key stays within maxN (maxN 0: always), and
// reports whether it did.
func (c *Counts) Add(key string, n, maxN int32) bool {
	s := &c.shards[maphash.String(c.seed, key)%shards]
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.m[key]
	if maxN > 0 && v+n > maxN {
		return false
	}
	s.m[key] = v + n
	return true
}

// AddSome counts as many of n more of key as keep it within maxN (> 0), and
// returns how many it counted, and the key's count before.
func (c *Counts) AddSome(key string, n int64, maxN int32) (took int64, had int32) {
	s := &c.shards[maphash.String(c.seed, key)%shards]
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.m[key]
	took = min(n, max(int64(maxN)-int64(v), 0))
	if took > 0 {
		s.m[key] = v + int32(took)
	}
	return took, v
}

// Sub takes n of key off.
func (c *Counts) Sub(key string, n int32) {
	s := &c.shards[maphash.String(c.seed, key)%shards]
	s.mu.Lock()
	if v := s.m[key] - n; v > 0 {
		s.m[key] = v
	} else {
		delete(s.m, key)
	}
	s.mu.Unlock()
}

// Get returns the count of key.
func (c *Counts) Get(key string) int32 {
	s := &c.shards[maphash.String(c.seed, key)%shards]
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[key]
}

// Keys returns how many keys have a count other than zero.
func (c *Counts) Keys() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}
