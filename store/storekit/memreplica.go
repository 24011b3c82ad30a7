package storekit

import (
	"context"
	"fmt"
	"time"

	"github.com/axsched/ax/store"
)

// memReplica is what an owner published (store.ReplicaStore).
type memReplica struct {
	name      string
	figures   store.ReplicaFigures
	published time.Time
}

// PublishReplica implements [store.ReplicaStore.PublishReplica]. It forgets the
// figures of owners the store forgot, and those older than [store.ReplicaKeep].
func (s *MemoryStore) PublishReplica(ctx context.Context, o store.Owner, f store.ReplicaFigures) error {
	switch {
	case o.Name == "" || len(o.Name) > store.OwnerNameMax:
		return fmt.Errorf("storekit: memory store: publish replica: owner name %q: must be 1 to %d bytes: %w", o.Name, store.OwnerNameMax, store.ErrInvalidChange)
	case len(f.Version) > store.ReplicaVersionMax:
		return fmt.Errorf("storekit: memory store: publish replica: Version: %d bytes, at most %d (ReplicaVersionMax): %w", len(f.Version), store.ReplicaVersionMax, store.ErrInvalidChange)
	}
	return s.read(ctx, "publish replica", func() {
		now := s.nowLocked()
		for e, r := range s.replicas {
			if _, ok := s.owners[e]; !ok || now.Sub(r.published) > store.ReplicaKeep {
				delete(s.replicas, e)
			}
		}
		s.replicas[o.Epoch] = memReplica{name: o.Name, figures: f, published: now}
	})
}

// Replicas implements [store.ReplicaStore.Replicas].
func (s *MemoryStore) Replicas(ctx context.Context) ([]store.Replica, time.Time, error) {
	var (
		out []store.Replica
		now time.Time
	)
	err := s.read(ctx, "replicas", func() {
		now = s.nowLocked()
		for e, m := range s.owners {
			if !m.expires.After(now) {
				continue
			}
			r := store.Replica{Owner: store.Owner{Name: m.name, Epoch: e, Lease: m.lease}, Expires: m.expires}
			if p, ok := s.replicas[e]; ok && p.name == m.name {
				r.Published, r.Figures = p.published, p.figures
			}
			out = append(out, r)
		}
	})
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Epoch < out[j-1].Epoch; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out, now, err
}
