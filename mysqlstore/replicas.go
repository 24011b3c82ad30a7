package mysqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/axsched/ax/store"
)

var _ store.ReplicaStore = (*Store)(nil)

// replicasSuffix names the table of the figures owners publish (<table>_stats).
const replicasSuffix = "_stats"

// replicasSchema is the table of the figures each owner published last: one row per
// epoch, written by PublishReplica only, never by a commit, and never locking an
// owner row.
const replicasSchema = `CREATE TABLE IF NOT EXISTS %s (
	epoch        BIGINT UNSIGNED NOT NULL,
	name         VARBINARY(64)   NOT NULL,
	figures      BLOB            NOT NULL COMMENT 'JSON of store.ReplicaFigures',
	published_at DATETIME(6)     NOT NULL COMMENT 'UTC, server clock',
	PRIMARY KEY (epoch)
) ENGINE=InnoDB`

// replicaPruneEvery is how often, at most, a store deletes the figures that were not
// published again for store.ReplicaKeep.
const replicaPruneEvery = time.Minute

// PublishReplica implements [store.ReplicaStore.PublishReplica]: one upsert of the
// owner's row in <table>_stats, on the database's clock. At most once a minute it
// also deletes the rows published last more than [store.ReplicaKeep] ago.
func (s *Store) PublishReplica(ctx context.Context, o store.Owner, f store.ReplicaFigures) error {
	switch {
	case o.Name == "" || len(o.Name) > store.OwnerNameMax:
		return fmt.Errorf("mysqlstore: publish replica: owner name %q: must be 1 to %d bytes: %w", o.Name, store.OwnerNameMax, store.ErrInvalidChange)
	case len(f.Version) > store.ReplicaVersionMax:
		return fmt.Errorf("mysqlstore: publish replica: Version: %d bytes, at most %d (ReplicaVersionMax): %w", len(f.Version), store.ReplicaVersionMax, store.ErrInvalidChange)
	}
	if err := s.checkOpen("publish replica"); err != nil {
		return err
	}
	js, err := json.Marshal(&f)
	if err != nil {
		return fmt.Errorf("mysqlstore: publish replica: %w", err)
	}
	q := newQuery(160 + 2*len(js)).raw("INSERT INTO " + s.replicas + " (epoch, name, figures, published_at) VALUES (").
		uint(o.Epoch).raw(", ").hexString(o.Name).raw(", ").hexBytes(js).raw(", " + nowSQL + ")" +
		" ON DUPLICATE KEY UPDATE name = VALUES(name), figures = VALUES(figures), published_at = VALUES(published_at)").String()
	if err := s.retry(ctx, "publish replica", func() error {
		_, err := s.db.ExecContext(ctx, q)
		return err
	}); err != nil {
		return err
	}
	now := time.Now().UnixNano()
	if last := s.replicaPruned.Load(); now-last >= int64(replicaPruneEvery) && s.replicaPruned.CompareAndSwap(last, now) {
		prune := "DELETE FROM " + s.replicas + " WHERE published_at < " + nowSQL + " - INTERVAL " +
			strconv.FormatInt(int64(store.ReplicaKeep/time.Second), 10) + " SECOND"
		if _, err := s.db.ExecContext(ctx, prune); err != nil {
			return s.wrap("publish replica: delete old figures", err)
		}
	}
	return nil
}

// Replicas implements [store.ReplicaStore.Replicas]: one read of the live owner rows
// joined with their figures, locking nothing.
func (s *Store) Replicas(ctx context.Context) ([]store.Replica, time.Time, error) {
	if err := s.checkOpen("replicas"); err != nil {
		return nil, time.Time{}, err
	}
	const us = "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
	q := "SELECT " + us + nowSQL + "), o.epoch, o.name, o.lease_us, " + us + "o.expires_at), r.figures, " + us + "r.published_at) FROM " +
		"(SELECT 1) one LEFT JOIN " + s.owners + " o ON o." + liveOwnerSQL + " LEFT JOIN " + s.replicas + " r ON r.epoch = o.epoch AND r.name = o.name ORDER BY o.epoch"
	var (
		out   []store.Replica
		nowUS int64
	)
	err := s.retry(ctx, "replicas", func() error {
		out = out[:0]
		return scanAll(ctx, s.db, q, func(sc scanner) error {
			var (
				epoch                       sql.NullInt64
				name, figures               []byte
				leaseUS, expires, published sql.NullInt64
			)
			if err := sc.Scan(&nowUS, &epoch, &name, &leaseUS, &expires, &figures, &published); err != nil {
				return err
			}
			if !epoch.Valid {
				return nil // no live owner: the row of (SELECT 1) alone
			}
			r := store.Replica{
				Owner:   store.Owner{Name: string(name), Epoch: uint64(epoch.Int64), Lease: time.Duration(leaseUS.Int64) * time.Microsecond},
				Expires: time.UnixMicro(expires.Int64).UTC(),
			}
			if published.Valid {
				if err := json.Unmarshal(figures, &r.Figures); err != nil {
					return fmt.Errorf("figures of owner %s/%d: %w", r.Name, r.Epoch, err)
				}
				r.Published = time.UnixMicro(published.Int64).UTC()
			}
			out = append(out, r)
			return nil
		})
	})
	if err != nil {
		return nil, time.Time{}, err
	}
	return out, time.UnixMicro(nowUS).UTC(), nil
}
