package mysqlstore

import (
	"context"
	"database/sql"
	"slices"
	"time"

	"github.com/axsched/ax/store"
)

// lockRows reads and locks the batch's rows and the holders of its inserts' unique keys.
// A row of owner (when not 0) that set records is given the state the set records.
func (s *Store) lockRows(ctx context.Context, tx *sql.Tx, b *batch, rows map[string]*row, holders map[string]keyHolder, owner uint64, set *startSet) error {
	var ids, adopted []string // one lock order for every committer
	for _, id := range b.ids {
		if b.adopts[id] {
			adopted = append(adopted, id)
		} else {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	slices.Sort(adopted)
	var others []uint64 // the owners of the live rows of other owners
	chunks := func(yield func(chunk []string, skip bool) bool) {
		for chunk := range slices.Chunk(ids, selectIDsMax) {
			if !yield(chunk, false) {
				return
			}
		}
		for chunk := range slices.Chunk(adopted, selectIDsMax) {
			if !yield(chunk, true) {
				return
			}
		}
	}
	for chunk, skip := range chunks {
		q := newQuery(64 + len(chunk)*(2*store.StoredIDMax+4))
		q.raw("SELECT id, fence, state, attempt, unique_key, owner, unique_until, unique_for_ms FROM ").raw(s.table).raw(" WHERE id IN (")
		for i, id := range chunk {
			if i > 0 {
				q.raw(",")
			}
			q.hexString(id)
		}
		q.raw(") FOR UPDATE")
		if skip {
			q.raw(" SKIP LOCKED")
		}
		err := scanAll(ctx, tx, q.String(), func(sc scanner) error {
			r := &row{exists: true, present: true, keyKnown: true}
			var (
				code          uint8
				by            uint64
				until, window int64
			)
			if err := sc.Scan(&r.id, &r.fence, &code, &r.attempt, &r.key, &by, &until, &window); err != nil {
				return err
			}
			r.until, r.window = fromUntil(until), time.Duration(window)*time.Millisecond
			st, err := decodeState(code)
			if err != nil {
				return err
			}
			r.state, r.preFence, r.owned, r.mine, r.by = st, r.fence, by != 0, by != 0 && by == owner, by
			if e, ok := set.get(r.id); ok && r.mine && e.applies(r.fence, st) {
				r.inSet, r.fence, r.state, r.attempt = true, e.fence, store.Running, e.attempt
			} else if ok {
				set.remove(r.id) // an entry the row moved past: none should be left
			}
			if r.owned && !r.mine && st.Live() {
				others = append(others, by)
			}
			rows[r.id] = r
			if r.key != "" && st.Live() {
				holders[r.key] = keyHolder{id: r.id}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if len(others) > 0 {
		// Their start sets: the rows are locked, so an owner adds no start of them
		// until this transaction ends (its renewal's check waits for the rows).
		slices.Sort(others)
		sets, err := s.readSets(ctx, tx, slices.Compact(others))
		if err != nil {
			return err
		}
		for _, r := range rows {
			if e, ok := sets[r.by][r.id]; ok && r.owned && !r.mine && e.applies(r.fence, r.state) {
				r.inSet, r.fence, r.state, r.attempt = true, e.fence, store.Running, e.attempt
			}
		}
	}
	var skipped []string // adopted rows SKIP LOCKED passed over, or absent
	for _, id := range adopted {
		if rows[id] == nil {
			skipped = append(skipped, id)
		}
	}
	for chunk := range slices.Chunk(skipped, selectIDsMax) {
		q := newQuery(64 + len(chunk)*(2*store.StoredIDMax+4)).raw("SELECT id FROM ").raw(s.table).raw(" WHERE id IN ").hexList(chunk)
		err := scanAll(ctx, tx, q.String(), func(sc scanner) error { // read committed: no lock, no wait
			var id string
			err := sc.Scan(&id)
			rows[id] = &row{id: id, exists: true, present: true, busy: true, attempt: -1}
			return err
		})
		if err != nil {
			return err
		}
	}
	for _, id := range b.ids {
		if rows[id] == nil {
			rows[id] = &row{id: id, attempt: -1}
		}
	}
	keys := slices.Sorted(slices.Values(b.keys))
	for chunk := range slices.Chunk(keys, selectIDsMax) {
		q := newQuery(64 + len(chunk)*(2*store.UniqueKeyMax+4))
		q.raw("SELECT id, live_key, state, " + windowEnd + " FROM ").raw(s.table).raw(" WHERE live_key IN (")
		for i, k := range chunk {
			if i > 0 {
				q.raw(",")
			}
			q.hexString(k)
		}
		q.raw(") FOR UPDATE")
		err := scanAll(ctx, tx, q.String(), func(sc scanner) error {
			var (
				id, key string
				code    uint8
				end     int64
			)
			if err := sc.Scan(&id, &key, &code, &end); err != nil {
				return err
			}
			st, err := decodeState(code)
			if err != nil {
				return err
			}
			holders[key] = keyHolder{id: id, ended: !st.Live(), until: fromUntil(end)}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
