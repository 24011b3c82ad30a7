package mysqlstore

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sync"

	"github.com/axsched/ax/store"
)

// The start set of an owner (see doc.go, "Starts"): the attempts the owner started on
// task rows it owns, recorded in its owner row (page 0, the started column) and, beyond
// startPageBytes, in rows of <table>_starts (pages 1, 2, …), instead of in the task
// rows. A task row in an owner's set keeps its waiting state, attempt and fence; the
// set's entry says the task is Running with the entry's attempt, fence and UpdatedAt.

// startEntry is one start in a set: the attempt that began on the task row whose
// stored fence is pre.
type startEntry struct {
	pre, fence uint64
	attempt    int
	updated    int64 // unix ms
	page       int   // the page that holds it
}

// applies reports whether e describes the stored row of owner, fence and state: the
// row still is where the start found it. A row that moved on (ended, rescued,
// requeued) has another fence, or is terminal.
func (e startEntry) applies(fence uint64, st store.State) bool {
	return e.pre == fence && st.Live()
}

// overlay returns t as the entry says it is: Running, with the entry's attempt, fence
// and UpdatedAt.
func (e startEntry) overlay(t *store.StoredTask) {
	t.State, t.Attempt, t.Fence, t.UpdatedAt = store.Running, e.attempt, e.fence, fromMillis(e.updated)
}

// startPageBytes bounds the encoding of one page of a set, as entrySize counts it:
// MaxConcurrency tasks of IDs of 36 bytes, 51 to 56 bytes an entry as counted, fill
// about MaxConcurrency/150 pages. The encoding written (startFormat) takes a fraction
// of that when the IDs share prefixes, as a kernel's do.
const startPageBytes = 8 << 10

// The formats of an encoded page, its first byte. startFormatPlain spells each ID
// whole and each UpdatedAt as it is: entrySize counts it. startFormat, the one
// written, holds the entries in ID order, each ID as the length of the prefix it
// shares with the ID before it and the rest, and each UpdatedAt as the difference
// from the one before it. A store reads both.
const (
	startFormatPlain = 1
	startFormat      = 2
)

// startPage is one page of a set: the IDs it holds and the size of its encoding.
type startPage struct {
	ids   map[string]struct{}
	bytes int
	dirty bool // changed since the set was last written
}

// startSet is an owner's set as the store knows it: the entries, their pages, and
// version, the owner row's started_v when the set was read or written.
type startSet struct {
	version uint64
	entries map[string]startEntry
	pages   []*startPage
}

func newStartSet() *startSet {
	return &startSet{entries: make(map[string]startEntry)}
}

// entrySize bounds the length of the entry's encoding in either format: the shared
// prefix's length counted as the whole ID's, and UpdatedAt (or its difference from the
// one before it) as the longest varint.
func entrySize(id string, e startEntry) int {
	return 2*uvarintLen(uint64(len(id))) + len(id) + uvarintLen(e.pre) + uvarintLen(e.fence-e.pre) +
		uvarintLen(uint64(e.attempt)) + binary.MaxVarintLen64
}

// uvarintLen is the length of binary.AppendUvarint's encoding of v.
func uvarintLen(v uint64) int {
	return (bits.Len64(v|1) + 6) / 7
}

// appendEntry appends the entry in startFormatPlain.
func appendEntry(b []byte, id string, e startEntry) []byte {
	b = binary.AppendUvarint(b, uint64(len(id)))
	b = append(b, id...)
	return appendValues(b, e, e.updated)
}

// appendValues appends the entry's fences and attempt, and updated (its UpdatedAt, or
// the difference from the entry before it).
func appendValues(b []byte, e startEntry, updated int64) []byte {
	b = binary.AppendUvarint(b, e.pre)
	b = binary.AppendUvarint(b, e.fence-e.pre)
	b = binary.AppendUvarint(b, uint64(e.attempt))
	return binary.AppendVarint(b, updated)
}

// appendPage appends the entries of ids, sorted, in startFormat.
func appendPage(b []byte, ids []string, entries map[string]startEntry) []byte {
	b = append(b, startFormat)
	prev, updated := "", int64(0)
	for _, id := range ids {
		n := 0
		for n < len(id) && n < len(prev) && id[n] == prev[n] {
			n++
		}
		e := entries[id]
		b = binary.AppendUvarint(b, uint64(n))
		b = binary.AppendUvarint(b, uint64(len(id)-n))
		b = append(b, id[n:]...)
		b = appendValues(b, e, e.updated-updated)
		prev, updated = id, e.updated
	}
	return b
}

// decodePage calls f for each entry of the encoded page b (empty: none).
func decodePage(b []byte, f func(id string, e startEntry)) error {
	if len(b) == 0 {
		return nil
	}
	format := b[0]
	if format != startFormat && format != startFormatPlain {
		return fmt.Errorf("mysqlstore: start set page of format %d, want %d or %d", b[0], startFormatPlain, startFormat)
	}
	b = b[1:]
	bad := errors.New("mysqlstore: start set page truncated")
	var (
		prev    []byte
		updated int64
	)
	for len(b) > 0 {
		shared := uint64(0)
		if format == startFormat {
			var k int
			if shared, k = binary.Uvarint(b); k <= 0 || shared > uint64(len(prev)) {
				return bad
			}
			b = b[k:]
		}
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return bad
		}
		id := make([]byte, 0, int(shared)+int(n))
		id = append(append(id, prev[:shared]...), b[k:k+int(n)]...)
		b = b[k+int(n):]
		var v [3]uint64
		for i := range v {
			if v[i], k = binary.Uvarint(b); k <= 0 {
				return bad
			}
			b = b[k:]
		}
		u, k := binary.Varint(b)
		if k <= 0 {
			return bad
		}
		b = b[k:]
		if format == startFormat {
			u += updated
			updated = u
		}
		f(string(id), startEntry{pre: v[0], fence: v[0] + v[1], attempt: int(v[2]), updated: u})
		prev = id
	}
	return nil
}

// add records e for id (replacing an entry of id), in the first page with room.
func (s *startSet) add(id string, e startEntry) {
	s.remove(id)
	size := entrySize(id, e)
	p := 0
	for p < len(s.pages) && s.pages[p].bytes+size > startPageBytes && s.pages[p].bytes > 1 {
		p++
	}
	if p == len(s.pages) {
		s.pages = append(s.pages, &startPage{ids: make(map[string]struct{}), bytes: 1})
	}
	pg := s.pages[p]
	pg.ids[id] = struct{}{}
	pg.bytes += size
	pg.dirty = true
	e.page = p
	s.entries[id] = e
}

// remove drops the entry of id, if any.
func (s *startSet) remove(id string) {
	e, ok := s.entries[id]
	if !ok {
		return
	}
	pg := s.pages[e.page]
	delete(pg.ids, id)
	pg.bytes -= entrySize(id, e)
	pg.dirty = true
	delete(s.entries, id)
}

// encode returns page p's encoding in startFormat (nil for an empty page).
func (s *startSet) encode(p int) []byte {
	pg := s.pages[p]
	if len(pg.ids) == 0 {
		return nil
	}
	ids := make([]string, 0, len(pg.ids))
	for id := range pg.ids {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return appendPage(make([]byte, 0, pg.bytes), ids, s.entries)
}

// dirty reports whether a page changed since the set was last written.
func (s *startSet) dirty() bool {
	for _, pg := range s.pages {
		if pg.dirty {
			return true
		}
	}
	return false
}

// written marks every page written at version v.
func (s *startSet) written(v uint64) {
	s.version = v
	for _, pg := range s.pages {
		pg.dirty = false
	}
}

// ownerStarts is what the store keeps of one owner's set between its commits.
type ownerStarts struct {
	// sem is held by the call that uses the set: the owner's commits that change
	// stored tasks take turns (they would wait for each other on the owner row anyway).
	sem chan struct{}
	// set is the set as the last call left it; nil when unknown (never read, or a call
	// failed after it changed it): the next call reads it.
	set *startSet
}

// startsOf returns the store's record of o's set.
func (s *Store) startsOf(epoch uint64) *ownerStarts {
	s.startsMu.Lock()
	defer s.startsMu.Unlock()
	if s.starts == nil {
		s.starts = make(map[uint64]*ownerStarts)
	}
	os := s.starts[epoch]
	if os == nil {
		os = &ownerStarts{sem: make(chan struct{}, 1)}
		s.starts[epoch] = os
	}
	return os
}

// joined records the set of an owner that just joined: empty, at version 0, so that
// its first commit needs no read of it.
func (s *Store) joined(epoch uint64) {
	os := s.startsOf(epoch)
	os.sem <- struct{}{}
	if os.set == nil {
		os.set = newStartSet()
	}
	<-os.sem
}

// forgetStarts drops the store's record of an owner that lost its lease or left.
func (s *Store) forgetStarts(epoch uint64) {
	s.startsMu.Lock()
	defer s.startsMu.Unlock()
	delete(s.starts, epoch)
}

// startsState is the part of Store that holds the owners' sets.
type startsState struct {
	startsMu sync.Mutex
	starts   map[uint64]*ownerStarts // by epoch: the owners that committed through this store
}

// setQuery returns the read of epoch's set: its owner row's page (page 0, with the
// version) and its pages in the starts table, in one statement, so one read view.
func (s *Store) setQuery(epoch uint64) string {
	e := newQuery(24).uint(epoch).String()
	return "SELECT 0, started_v, started FROM " + s.owners + " WHERE epoch = " + e +
		" UNION ALL SELECT page, 0, entries FROM " + s.startsTable + " WHERE epoch = " + e
}

// loadSet reads epoch's set. An owner row that is gone reads as an empty set of
// version 0, which a renewal then finds out.
func (s *Store) loadSet(ctx context.Context, ex queryer, epoch uint64) (*startSet, error) {
	set := newStartSet()
	type page struct {
		n int
		b []byte
	}
	var pages []page
	err := scanAll(ctx, ex, s.setQuery(epoch), func(sc scanner) error {
		var (
			p page
			v uint64
		)
		if err := sc.Scan(&p.n, &v, &p.b); err != nil {
			return err
		}
		if p.n == 0 {
			set.version = v
		}
		pages = append(pages, p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, p := range pages {
		if p.n < 0 || p.n > 1<<20 {
			return nil, fmt.Errorf("mysqlstore: start set of owner %d: page %d", epoch, p.n)
		}
		for len(set.pages) <= p.n {
			set.pages = append(set.pages, &startPage{ids: make(map[string]struct{}), bytes: 1})
		}
		pg := set.pages[p.n]
		err := decodePage(p.b, func(id string, e startEntry) {
			e.page = p.n
			set.entries[id] = e
			pg.ids[id] = struct{}{}
			pg.bytes += entrySize(id, e)
		})
		if err != nil {
			return nil, fmt.Errorf("owner %d: %w", epoch, err)
		}
	}
	return set, nil
}

// readSets reads the sets of the owners epochs: entries by owner, then by task ID.
func (s *Store) readSets(ctx context.Context, ex queryer, epochs []uint64) (map[uint64]map[string]startEntry, error) {
	out := make(map[uint64]map[string]startEntry)
	if len(epochs) == 0 {
		return out, nil
	}
	list := uintList(epochs)
	q := "SELECT epoch, started FROM " + s.owners + " WHERE epoch IN " + list + " AND started IS NOT NULL" +
		" UNION ALL SELECT epoch, entries FROM " + s.startsTable + " WHERE epoch IN " + list
	err := scanAll(ctx, ex, q, func(sc scanner) error {
		var (
			e uint64
			b []byte
		)
		if err := sc.Scan(&e, &b); err != nil {
			return err
		}
		m := out[e]
		if m == nil {
			m = make(map[string]startEntry)
			out[e] = m
		}
		return decodePage(b, func(id string, en startEntry) { m[id] = en })
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ownedTask is a task row read with its owner.
type ownedTask struct {
	store.StoredTask
	owner uint64
}

// scanOwned reads the columns of scanTask (or columnsNoPayload), then owner.
func scanOwned(sc scanner) (ownedTask, error) {
	var t ownedTask
	var err error
	t.StoredTask, err = scanTaskWith(sc, &t.owner)
	return t, err
}

// scanOwnedFull reads the columns of scanOwned, then result, history and
// implicitColumns.
func (s *Store) scanOwnedFull(sc scanner) (ownedTask, error) {
	var t ownedTask
	var result, hist []byte
	var startedAt int64
	var owner []byte
	var err error
	t.StoredTask, err = scanTaskWith(sc, &t.owner, &result, &hist, &startedAt, &owner)
	t.Result, t.History = result, decodeHistory(hist)
	withImplicit(&t.StoredTask, startedAt, string(owner), s.opts.AttemptsKept)
	return t, err
}

// overlaySets reads the sets of the owners of the live rows among ts and gives each
// row in its owner's set the state the set records.
func (s *Store) overlaySets(ctx context.Context, ex queryer, ts []ownedTask) error {
	var epochs []uint64
	for i := range ts {
		if t := &ts[i]; t.owner != 0 && t.State.Live() {
			epochs = append(epochs, t.owner)
		}
	}
	if len(epochs) == 0 {
		return nil
	}
	slices.Sort(epochs)
	sets, err := s.readSets(ctx, ex, slices.Compact(epochs))
	if err != nil {
		return err
	}
	for i := range ts {
		t := &ts[i]
		if e, ok := sets[t.owner][t.ID]; ok && e.applies(t.Fence, t.State) {
			e.overlay(&t.StoredTask)
		}
	}
	return nil
}

// get returns the entry of id; a nil set has none.
func (s *startSet) get(id string) (startEntry, bool) {
	if s == nil {
		return startEntry{}, false
	}
	e, ok := s.entries[id]
	return e, ok
}

// next is the version the set has once its changes are written.
func (s *startSet) next() uint64 {
	if s.dirty() {
		return s.version + 1
	}
	return s.version
}

// toSet applies the planned rows to set: a row started (and changed no other way) gets
// its entry, a row the batch writes loses it. It returns the rows started that the set
// did not hold: the renewal of an optimistic plan checks that they are the owner's,
// live, at the fence the plan assumed.
func toSet(set *startSet, rows map[string]*row, ids []string) []*row {
	var fresh []*row
	for _, id := range ids {
		switch r := rows[id]; {
		case r.started && !r.dirty:
			set.add(id, startEntry{pre: r.preFence, fence: r.fence, attempt: r.attempt, updated: millis(r.updatedAt)})
			if !r.inSet {
				fresh = append(fresh, r)
			}
		case r.dirty:
			set.remove(id)
		}
	}
	return fresh
}

// renewSetQuery returns the renewal of o's lease by a commit that planned with set
// (optimistic): the UPDATE of renewQuery that also writes the set's page 0 when it
// changed and bumps started_v when any page did, and that changes o's row only when
// started_v is the version the set was read at and the rows of fresh (started, not in
// the set before) are o's, live, at the fences the plan assumed. That check is a
// locking read (shared locks on those task rows until the transaction ends), so a
// writer that locked one of them first is waited for and its change seen, and one
// that comes later waits for this transaction and then reads o's set with the start.
// So a renewal that changes no row means the lease ended or the plan was wrong: then
// the locking plan decides.
func (s *Store) renewSetQuery(o *store.Owner, set *startSet, fresh []*row) string {
	size := 512 + 2*len(o.Name)
	if len(set.pages) > 0 && set.pages[0].dirty {
		size += 2 * set.pages[0].bytes
	}
	size += len(fresh) * (2*store.StoredIDMax + 4)
	q := newQuery(size).raw("UPDATE ").raw(s.owners).raw(" SET expires_at = " + nowSQL + " + INTERVAL lease_us MICROSECOND, " + connIDSQL)
	if set.dirty() {
		if set.pages[0].dirty {
			q.raw(", started = ")
			writeBlob(q, set.encode(0))
		}
		q.raw(", started_v = ").uint(set.version + 1)
	}
	q.raw(" WHERE epoch = ").uint(o.Epoch).raw(" AND name = ").hexString(o.Name).raw(" AND " + liveOwnerSQL + " AND started_v = ").uint(set.version)
	if len(fresh) > 0 {
		q.raw(" AND (").raw(s.startCheck(o.Epoch, fresh)).raw(") = ").int(int64(len(fresh)))
	}
	return q.String()
}

// startCheck returns the count of the rows of fresh that are owner's, live, at their
// preFence: a range of the primary key per distinct fence, read with shared locks.
func (s *Store) startCheck(owner uint64, fresh []*row) string {
	// One part per stored fence: the rows the kernel inserted share fence 1.
	byFence := make(map[uint64][]string)
	var fences []uint64
	size := 256
	for _, r := range fresh {
		if _, ok := byFence[r.preFence]; !ok {
			fences = append(fences, r.preFence)
		}
		byFence[r.preFence] = append(byFence[r.preFence], r.id)
		size += 2*len(r.id) + 4
	}
	q := newQuery(size + 32*len(fences)).raw("SELECT COUNT(*) FROM ").raw(s.table).raw(" FORCE INDEX (PRIMARY) WHERE owner = ").uint(owner).
		raw(" AND state <= " + liveMaxCode + " AND (")
	for i, f := range fences {
		if i > 0 {
			q.raw(" OR ")
		}
		q.raw("id IN ").hexList(byFence[f]).raw(" AND fence = ").uint(f)
	}
	return q.raw(") LOCK IN SHARE MODE").String()
}

// renewWith runs renewal (see renewSetQuery) in tx: errLost when o's lease ended,
// errReplan when it changed no row otherwise.
func (s *Store) renewWith(ctx context.Context, tx *sql.Tx, o *store.Owner, renewal string) error {
	res, err := tx.ExecContext(ctx, renewal)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return err
	}
	if err := s.renew(ctx, tx, o); err != nil {
		return err
	}
	return errReplan
}

// setWrites returns the writes of set's changed pages by a commit that holds its owner
// row locked (the locking plan): an UPDATE of the owner row (page 0 and started_v),
// and pageWrites.
func (s *Store) setWrites(owner uint64, set *startSet) []statement {
	if !set.dirty() {
		return nil
	}
	q := newQuery(128 + 2*set.pages[0].bytes).raw("UPDATE ").raw(s.owners).raw(" SET ")
	if set.pages[0].dirty {
		writeBlob(q.raw("started = "), set.encode(0)).raw(", ")
	}
	q.raw("started_v = ").uint(set.version + 1).raw(" WHERE epoch = ").uint(owner)
	return append([]statement{{sql: q.String(), want: 1}}, s.pageWrites(owner, set)...)
}

// pageWrites returns the upsert of set's changed pages beyond the first (none when
// none changed). Its count of rows is not checked: the owner row's renewal or UPDATE
// vouches for the set.
func (s *Store) pageWrites(owner uint64, set *startSet) []statement {
	var q *query
	for p := 1; p < len(set.pages); p++ {
		if !set.pages[p].dirty {
			continue
		}
		if q == nil {
			q = newQuery(256 + 2*startPageBytes).raw("INSERT INTO ").raw(s.startsTable).raw(" (epoch, page, entries) VALUES ")
		} else {
			q.raw(",")
		}
		writeBlob(q.raw("(").uint(owner).raw(",").int(int64(p)).raw(","), set.encode(p)).raw(")")
	}
	if q == nil {
		return nil
	}
	q.raw(" ON DUPLICATE KEY UPDATE entries = VALUES(entries)")
	return []statement{{sql: q.String(), want: -1}}
}

// writeBlob writes b as a literal, NULL when empty.
func writeBlob(q *query, b []byte) *query {
	if len(b) == 0 {
		return q.raw("NULL")
	}
	return q.hexBytes(b)
}
