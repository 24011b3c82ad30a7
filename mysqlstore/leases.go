package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/axsched/ax/store"
	"github.com/go-sql-driver/mysql"
)

func checkLeaseArgs(name string, ttl time.Duration, what string) error {
	switch {
	case name == "" || len(name) > store.LeaseNameMax:
		return fmt.Errorf("mysqlstore: %s: lease name %q: must be 1 to %d bytes: %w", what, name, store.LeaseNameMax, store.ErrInvalidChange)
	case ttl < store.LeaseMin:
		return fmt.Errorf("mysqlstore: %s: ttl %v: must be at least %v: %w", what, ttl, store.LeaseMin, store.ErrInvalidChange)
	}
	return nil
}

// AcquireLease implements [store.SharedStore.AcquireLease] in one transaction (read
// committed): it locks the lease's row with SELECT … FOR UPDATE and, when nobody else
// holds a live grant, takes a fence from the epoch counter and writes the grant, with an
// UPDATE of the locked row or an INSERT of a new one (a concurrent INSERT of the same
// name makes one of them fail on the primary key, and retry). Times are the database's.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (uint64, error) {
	if err := checkLeaseArgs(name, ttl, "acquire lease"); err != nil {
		return 0, err
	}
	if holder == "" || len(holder) > store.OwnerNameMax {
		return 0, fmt.Errorf("mysqlstore: acquire lease: holder %q: must be 1 to %d bytes: %w", holder, store.OwnerNameMax, store.ErrInvalidChange)
	}
	if err := s.checkOpen("acquire lease"); err != nil {
		return 0, err
	}
	var (
		fence uint64
		held  error
	)
	us := strconv.FormatInt(ttl.Microseconds(), 10)
	err := s.retry(ctx, "acquire lease", func() error {
		held = nil
		return s.inTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted}, func(tx *sql.Tx) error {
			var (
				found, live bool
				cur         string
				expires     int64
			)
			q := newQuery(256 + 2*len(name)).raw("SELECT holder, expires_at > " + nowSQL + ", TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', expires_at) FROM ").
				raw(s.leases).raw(" WHERE name = ").hexString(name).raw(" FOR UPDATE")
			err := scanAll(ctx, tx, q.String(), func(sc scanner) error {
				found = true
				return sc.Scan(&cur, &live, &expires)
			})
			if err != nil {
				return err
			}
			if found && live && cur != holder {
				held = fmt.Errorf("mysqlstore: acquire lease %q: held by %q until %v: %w",
					name, cur, time.UnixMicro(expires).UTC(), store.ErrLeaseHeld)
				return nil
			}
			f, err := s.nextEpoch(ctx, tx, 0)
			if err != nil {
				return err
			}
			if found {
				q = newQuery(256 + 2*len(name) + 2*len(holder)).raw("UPDATE ").raw(s.leases).raw(" SET holder = ").hexString(holder).
					raw(", fence = ").uint(f).raw(", expires_at = " + nowSQL + " + INTERVAL " + us + " MICROSECOND WHERE name = ").hexString(name)
			} else {
				q = newQuery(256 + 2*len(name) + 2*len(holder)).raw("INSERT INTO ").raw(s.leases).raw(" (name, holder, fence, expires_at) VALUES (").
					hexString(name).raw(",").hexString(holder).raw(",").uint(f).raw("," + nowSQL + " + INTERVAL " + us + " MICROSECOND)")
			}
			if _, err := tx.ExecContext(ctx, q.String()); err != nil {
				var me *mysql.MySQLError
				if errors.As(err, &me) && me.Number == erDupEntry {
					return fmt.Errorf("%w: %w", errReplan, err) // granted concurrently: read it again
				}
				return err
			}
			fence = f
			return nil
		})
	})
	if err != nil {
		return 0, err
	}
	if held != nil {
		return 0, held
	}
	s.pruneEpochs(fence)
	return fence, nil
}

// RenewLease implements [store.SharedStore.RenewLease]: one UPDATE of the grant's row
// while it is live, on the database's clock.
func (s *Store) RenewLease(ctx context.Context, name string, fence uint64, ttl time.Duration) error {
	if err := checkLeaseArgs(name, ttl, "renew lease"); err != nil {
		return err
	}
	if err := s.checkOpen("renew lease"); err != nil {
		return err
	}
	where := newQuery(128 + 2*len(name)).raw(" WHERE name = ").hexString(name).raw(" AND fence = ").uint(fence).
		raw(" AND expires_at > " + nowSQL).String()
	update := "UPDATE " + s.leases + " SET expires_at = " + nowSQL + " + INTERVAL " + strconv.FormatInt(ttl.Microseconds(), 10) +
		" MICROSECOND" + where
	live := false
	err := s.retry(ctx, "renew lease", func() error {
		res, err := s.db.ExecContext(ctx, update)
		if err != nil {
			return maybeApplied(err)
		}
		n, err := res.RowsAffected()
		if err != nil || n == 1 {
			live = err == nil
			return err
		}
		// No row changed: the grant ended, or this renewal wrote the expiry the one
		// before it wrote (within the same microsecond). A read of the row tells.
		live = false
		return scanAll(ctx, s.db, "SELECT 1 FROM "+s.leases+where, func(scanner) error { live = true; return nil })
	})
	if err != nil {
		return err
	}
	if !live {
		return fmt.Errorf("mysqlstore: renew lease %q (fence %d): %w", name, fence, store.ErrLeaseLost)
	}
	return nil
}

// ReleaseLease implements [store.SharedStore.ReleaseLease]: one DELETE of the grant's
// row, if it is still that grant's.
func (s *Store) ReleaseLease(ctx context.Context, name string, fence uint64) error {
	if err := s.checkOpen("release lease"); err != nil {
		return err
	}
	q := newQuery(128 + 2*len(name)).raw("DELETE FROM ").raw(s.leases).raw(" WHERE name = ").hexString(name).
		raw(" AND fence = ").uint(fence)
	_, err := s.exec(ctx, "release lease", q.String())
	return err
}
