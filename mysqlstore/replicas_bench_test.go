package mysqlstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

// BenchmarkReplicas measures a kernel's publication of its figures (one upsert in
// <table>_stats) and a console's read of the replicas (the live owner rows joined
// with their figures), with 8 live owners that published.
func BenchmarkReplicas(b *testing.B) {
	s, _ := setup(b, mysqlstore.Options{})
	ctx := context.Background()
	var owners []store.Owner
	for i := range 8 {
		o, err := s.Join(ctx, fmt.Sprintf("bench-%d", i), time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		owners = append(owners, o)
	}
	f := store.ReplicaFigures{Version: "ax (devel)", Queued: store.ByPriority[int]{High: 1, Normal: 20, Low: 300}}
	for _, o := range owners {
		if err := s.PublishReplica(ctx, o, f); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("publish", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := s.PublishReplica(ctx, owners[0], f); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("list", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			rs, _, err := s.Replicas(ctx)
			if err != nil || len(rs) != len(owners) {
				b.Fatalf("Replicas() = %d replicas, %v; want %d", len(rs), err, len(owners))
			}
		}
	})
}
