package mysqlstore

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/axsched/ax/store"
)

var _ store.TaskLister = (*Store)(nil)

// listWindow bounds the index entries one segment of a [Store.ListTasks] call reads
// when some filter is not a prefix of the index it walks: a page may then come back
// short, with a cursor to continue from.
const listWindow = 1000

// The indexes a listing walks, besides the primary key and the state index.
const (
	kindIndexName  = "kind_id"
	groupIndexName = "grp_gkey_id"
	kindIndex      = "KEY " + kindIndexName + " (kind)"
	groupIndex     = "KEY " + groupIndexName + " (grp, gkey)"
)

// listColumns are the columns of a listed task: those of scanTask with an empty
// payload, then owner, the payload's length, and the raw codes of priority and run_at
// (the cursor's values).
const listColumns = columnsNoPayload + ", owner, LENGTH(payload), priority, run_at"

// segment is one index range a listing walks: the rows of prefix (conditions on the
// leading columns of index), in the order of cols (the next columns of the index, id
// last). The set segment (set) is the tasks of the owners' start sets instead.
type segment struct {
	index  string // FORCE INDEX name
	prefix string // SQL conditions, never empty ("1" for none)
	cols   []string
	set    bool
}

// listPlan is how a query is listed: its segments in order, whether some filter is
// left to check on the rows (residual: the segments' reads are bounded by listWindow),
// and the owner the set segment keeps (0: every owner).
type listPlan struct {
	kind     byte // the plan's shape, written in its cursors
	segs     []segment
	residual string // SQL conditions the index does not hold; "" for none
	owner    uint64
}

// allStateCodes are the stored state codes in index order.
var allStateCodes = func() []uint8 {
	var cs []uint8
	for st := store.Delayed; st <= store.Abandoned; st++ {
		cs = append(cs, stateCode(st))
	}
	slices.Sort(cs)
	return cs
}()

// planList chooses the index q is listed by:
//   - a State: the state index, one range per (state[, owner]), in owner, priority,
//     run_at, id order; Running also reads the owners' start sets first (a task its
//     owner started keeps its waiting row);
//   - an Owner or Pool alone: the state index, one range per state and owner;
//   - a Group, with the listing's indexes (indexed): the index (grp, gkey), in gkey
//     then id order;
//   - a Kind, with the listing's indexes: the index (kind), in id order;
//   - else: the primary key.
//
// The filters an index does not hold are checked on the rows, within listWindow
// entries of each range.
func planList(q *store.TaskQuery, indexed bool) listPlan {
	owner, hasOwner := q.Owner, q.Owner != 0 || q.Pool
	var p listPlan
	var residual []string
	addKind := func() {
		if q.Kind != "" {
			residual = append(residual, "kind = "+newQuery(16).hexString(q.Kind).String())
		}
	}
	addGroup := func() {
		if q.Group != "" {
			residual = append(residual, "grp = "+newQuery(16).hexString(q.Group).String())
		}
		if q.Key != "" {
			residual = append(residual, "gkey = "+newQuery(16).hexString(q.Key).String())
		}
	}
	stateSeg := func(code uint8) segment {
		sg := segment{index: ownerIndexName, prefix: fmt.Sprintf("state = %d", code), cols: []string{"owner", "priority", "run_at", "id"}}
		if hasOwner {
			sg.prefix += fmt.Sprintf(" AND owner = %d", owner)
			sg.cols = sg.cols[1:]
		}
		return sg
	}
	switch {
	case q.State != 0:
		p.kind = 's'
		if q.State == store.Running && !q.Pool { // pool tasks are in no start set
			p.segs = append(p.segs, segment{set: true, prefix: "1", cols: []string{"id"}})
			p.owner = owner
		}
		p.segs = append(p.segs, stateSeg(stateCode(q.State)))
		addKind()
		addGroup()
	case q.Group != "" && indexed:
		p.kind = 'g'
		sg := segment{index: groupIndexName, prefix: "grp = " + newQuery(16).hexString(q.Group).String(), cols: []string{"gkey", "id"}}
		if q.Key != "" {
			sg.prefix += " AND gkey = " + newQuery(16).hexString(q.Key).String()
			sg.cols = sg.cols[1:]
		}
		p.segs = []segment{sg}
		addKind()
	case q.Kind != "" && indexed:
		p.kind = 'k'
		p.segs = []segment{{index: kindIndexName, prefix: "kind = " + newQuery(16).hexString(q.Kind).String(), cols: []string{"id"}}}
	case hasOwner:
		p.kind = 'o'
		for _, c := range allStateCodes {
			p.segs = append(p.segs, stateSeg(c))
		}
		addKind()
		addGroup()
	default:
		p.kind = 'p'
		p.segs = []segment{{index: "PRIMARY", prefix: "id >= X''", cols: []string{"id"}}} // a range, for the plan's sake
		addKind()
		addGroup()
	}
	if hasOwner && p.kind != 's' && p.kind != 'o' { // not in the index's prefix
		residual = append(residual, fmt.Sprintf("owner = %d", owner))
	}
	p.residual = strings.Join(residual, " AND ")
	return p
}

// listPos is a position in a plan: a segment and the values of its cols there.
type listPos struct {
	seg  int
	vals []any // int64 or string, one per column of the segment
}

// encode returns the cursor of pos in plan kind.
func (pos listPos) encode(kind byte) string {
	b := []byte{1, kind, byte(pos.seg)}
	for _, v := range pos.vals {
		switch v := v.(type) {
		case int64:
			b = append(b, 'i')
			b = binary.AppendVarint(b, v)
		case string:
			b = append(b, 's')
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		}
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodePos reads the cursor c of field for plan p.
func decodePos(p *listPlan, field, c string) (listPos, error) {
	bad := store.InvalidCursor(field, c)
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) < 3 || b[0] != 1 || b[1] != p.kind || int(b[2]) >= len(p.segs) {
		return listPos{}, bad
	}
	pos := listPos{seg: int(b[2])}
	b = b[3:]
	for _, col := range p.segs[pos.seg].cols {
		if len(b) == 0 {
			return listPos{}, bad
		}
		tag := b[0]
		b = b[1:]
		switch {
		case tag == 'i' && col != "id" && col != "gkey":
			v, n := binary.Varint(b)
			if n <= 0 {
				return listPos{}, bad
			}
			pos.vals, b = append(pos.vals, v), b[n:]
		case tag == 's' && (col == "id" || col == "gkey"):
			l, n := binary.Uvarint(b)
			if n <= 0 || uint64(len(b)-n) < l {
				return listPos{}, bad
			}
			pos.vals, b = append(pos.vals, string(b[n:n+int(l)])), b[n+int(l):]
		default:
			return listPos{}, bad
		}
	}
	if len(b) != 0 {
		return listPos{}, bad
	}
	return pos, nil
}

// keyset writes the condition that the columns cols come after (op ">") or before
// ("<") vals in the index order, or are at vals too when inclusive: the nested form
// (a > x OR a = x AND (b > y OR …)), behind a bound on the first column that the range
// optimizer reads.
func keyset(qb *query, cols []string, vals []any, op string, inclusive bool) {
	value := func(v any) {
		if s, ok := v.(string); ok {
			qb.hexString(s)
		} else {
			qb.int(v.(int64))
		}
	}
	qb.raw(cols[0]).raw(" " + op + "= ")
	value(vals[0])
	qb.raw(" AND ")
	for i := range cols {
		qb.raw("(").raw(cols[i]).raw(" " + op)
		if i == len(cols)-1 && inclusive {
			qb.raw("=")
		}
		qb.raw(" ")
		value(vals[i])
		if i < len(cols)-1 {
			qb.raw(" OR ").raw(cols[i]).raw(" = ")
			value(vals[i])
			qb.raw(" AND ")
		}
	}
	qb.raw(strings.Repeat(")", len(cols)))
}

// listed is a row read by a listing: the task, its owner and its position.
type listed struct {
	info store.TaskInfo
	pos  listPos
}

// ListTasks implements [store.TaskLister.ListTasks]. It never scans the task table:
// every statement reads a range of an index (see planList), at most the page's rows
// plus one of each range when the index holds every filter, at most listWindow
// entries of each otherwise. A task that its owner started and whose start is
// recorded in the owner's start set lists as Running. Its statements run outside a
// transaction, one round trip each: a task that changes while a page is read may
// show the state it had just before.
func (s *Store) ListTasks(ctx context.Context, q store.TaskQuery) (store.TaskPage, error) {
	if err := s.checkOpen("list tasks"); err != nil {
		return store.TaskPage{}, err
	}
	if err := q.Validate(); err != nil {
		return store.TaskPage{}, fmt.Errorf("mysqlstore: list tasks: %w", err)
	}
	p := planList(&q, s.opts.ListIndexes)
	var from *listPos
	for _, c := range []struct{ field, cursor string }{{"After", q.After}, {"Before", q.Before}} {
		if c.cursor == "" {
			continue
		}
		pos, err := decodePos(&p, c.field, c.cursor)
		if err != nil {
			return store.TaskPage{}, fmt.Errorf("mysqlstore: list tasks: %w", err)
		}
		from = &pos
	}
	var page store.TaskPage
	err := s.retry(ctx, "list tasks", func() error {
		var err error
		page, err = s.listPage(ctx, s.db, &q, &p, from)
		return err
	})
	return page, err
}

// listPage reads the page of q from the position from (nil: the first page).
func (s *Store) listPage(ctx context.Context, tx queryer, q *store.TaskQuery, p *listPlan, from *listPos) (store.TaskPage, error) {
	back := q.Before != ""
	need := q.PageSize()
	var rows []listed
	var stop *listPos // where a bounded read ended before the page filled
	more := false
	segs := make([]int, 0, len(p.segs))
	for i := range p.segs {
		segs = append(segs, i)
	}
	if back {
		slices.Reverse(segs)
	}
	for _, i := range segs {
		var at []any
		if from != nil {
			if back && i > from.seg || !back && i < from.seg {
				continue
			}
			if i == from.seg {
				at = from.vals
			}
		}
		got, end, err := s.readSegment(ctx, tx, q, p, i, at, back, need-len(rows)+1)
		if err != nil {
			return store.TaskPage{}, err
		}
		rows = append(rows, got...)
		if len(rows) > need {
			rows, more = rows[:need], true
			break
		}
		if end != nil {
			stop, more = end, true
			break
		}
	}
	// rows are in walk order; pos of the last row walked (or stop) continues the walk.
	var page store.TaskPage
	cont := ""
	switch {
	case stop != nil:
		cont = stop.encode(p.kind)
	case more && len(rows) > 0:
		cont = rows[len(rows)-1].pos.encode(p.kind)
	}
	var first string
	if len(rows) > 0 {
		first = rows[0].pos.encode(p.kind)
	}
	if back {
		slices.Reverse(rows)
		page.Prev, page.Next = cont, first
		if len(rows) > 0 {
			page.Next = rows[len(rows)-1].pos.encode(p.kind)
		}
	} else {
		page.Next = cont
		if from != nil && len(rows) > 0 {
			page.Prev = first
		}
	}
	if err := s.overlayListed(ctx, tx, rows); err != nil {
		return store.TaskPage{}, err
	}
	for i := range rows {
		if q.Matches(&rows[i].info.StoredTask, rows[i].info.Owner) {
			page.Tasks = append(page.Tasks, rows[i].info)
		}
	}
	return page, nil
}

// readSegment reads up to limit rows of segment i of p after (before, when back) the
// values at (nil: from its start), in walk order. When the plan has residual filters,
// it reads at most listWindow index entries, and returns end, the position of the last
// of them, when it read that many without finding limit rows.
func (s *Store) readSegment(ctx context.Context, tx queryer, q *store.TaskQuery, p *listPlan, i int, at []any, back bool, limit int) ([]listed, *listPos, error) {
	sg := &p.segs[i]
	if sg.set {
		return s.readSetSegment(ctx, tx, p, i, at, back, limit)
	}
	op, dir := ">", ""
	if back {
		op, dir = "<", " DESC"
	}
	where := newQuery(256).raw(" FROM ").raw(s.table).raw(" FORCE INDEX (`" + sg.index + "`) WHERE ").raw(sg.prefix)
	if at != nil {
		where.raw(" AND ")
		keyset(where, sg.cols, at, op, false)
	}
	order := " ORDER BY " + strings.Join(sg.cols, dir+", ") + dir
	var end *listPos
	if p.residual != "" {
		// The window's last entry bounds the rows read: an index-only read.
		vals, err := s.windowEnd(ctx, tx, "SELECT "+strings.Join(sg.cols, ", ")+where.String()+order+
			fmt.Sprintf(" LIMIT 1 OFFSET %d", listWindow-1), sg.cols)
		if err != nil {
			return nil, nil, err
		}
		if vals != nil {
			end = &listPos{seg: i, vals: vals}
			where.raw(" AND ")
			keyset(where, sg.cols, vals, map[bool]string{false: "<", true: ">"}[back], true)
		}
		where.raw(" AND ").raw(p.residual)
	}
	stmt := "SELECT " + listColumns + where.String() + order + fmt.Sprintf(" LIMIT %d", limit)
	var out []listed
	err := scanAll(ctx, tx, stmt, func(sc scanner) error {
		var (
			l          listed
			size       int
			prio       uint8
			runAt      int64
			owner      uint64
			storedTask store.StoredTask
			err        error
		)
		storedTask, err = scanTaskWith(sc, &owner, &size, &prio, &runAt)
		l.info = store.TaskInfo{StoredTask: storedTask, Owner: owner, PayloadSize: size}
		l.info.Payload = nil
		l.pos.seg = i
		for _, c := range sg.cols {
			switch c {
			case "owner":
				l.pos.vals = append(l.pos.vals, int64(owner))
			case "priority":
				l.pos.vals = append(l.pos.vals, int64(prio))
			case "run_at":
				l.pos.vals = append(l.pos.vals, runAt)
			case "gkey":
				l.pos.vals = append(l.pos.vals, storedTask.Key)
			case "id":
				l.pos.vals = append(l.pos.vals, storedTask.ID)
			}
		}
		out = append(out, l)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	if len(out) >= limit {
		end = nil // the page fills before the window ends
	}
	return out, end, nil
}

// windowEnd runs stmt, an index-only read of the values of cols at the window's
// last entry, and returns them, or nil when the range holds fewer entries.
func (s *Store) windowEnd(ctx context.Context, tx queryer, stmt string, cols []string) ([]any, error) {
	var vals []any
	err := scanAll(ctx, tx, stmt, func(sc scanner) error {
		dst := make([]any, len(cols))
		ints := make([]int64, len(cols))
		strs := make([]string, len(cols))
		for j, c := range cols {
			if c == "id" || c == "gkey" {
				dst[j] = &strs[j]
			} else {
				dst[j] = &ints[j]
			}
		}
		if err := sc.Scan(dst...); err != nil {
			return err
		}
		for j, c := range cols {
			if c == "id" || c == "gkey" {
				vals = append(vals, strs[j])
			} else {
				vals = append(vals, ints[j])
			}
		}
		return nil
	})
	return vals, err
}

// readSetSegment reads the tasks of the live owners' start sets (of p.owner only,
// when set) after (before) the ID at, in ID order, up to limit: at most the tasks the
// owners run, read by primary key.
func (s *Store) readSetSegment(ctx context.Context, tx queryer, p *listPlan, i int, at []any, back bool, limit int) ([]listed, *listPos, error) {
	var epochs []uint64
	q := "SELECT epoch FROM " + s.owners + " WHERE started IS NOT NULL"
	if p.owner != 0 {
		q += fmt.Sprintf(" AND epoch = %d", p.owner)
	}
	err := scanAll(ctx, tx, q, func(sc scanner) error {
		var e uint64
		err := sc.Scan(&e)
		epochs = append(epochs, e)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	sets, err := s.readSets(ctx, tx, epochs)
	if err != nil {
		return nil, nil, err
	}
	var ids []string
	for _, set := range sets {
		for id := range set {
			if at == nil || !back && id > at[0].(string) || back && id < at[0].(string) {
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	if back {
		slices.Reverse(ids)
	}
	ids = ids[:min(len(ids), limit)]
	if len(ids) == 0 {
		return nil, nil, nil
	}
	stmt := newQuery(128 + 70*len(ids)).raw("SELECT " + listColumns + " FROM ").raw(s.table).raw(" WHERE id IN ").hexList(ids).String()
	byID := map[string]listed{}
	err = scanAll(ctx, tx, stmt, func(sc scanner) error {
		var (
			size  int
			prio  uint8
			runAt int64
			owner uint64
		)
		t, err := scanTaskWith(sc, &owner, &size, &prio, &runAt)
		t.Payload = nil
		byID[t.ID] = listed{info: store.TaskInfo{StoredTask: t, Owner: owner, PayloadSize: size}, pos: listPos{seg: i, vals: []any{t.ID}}}
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	out := make([]listed, 0, len(ids))
	for _, id := range ids {
		if l, ok := byID[id]; ok && l.info.State.Live() {
			if e, ok := sets[l.info.Owner][id]; ok && e.applies(l.info.Fence, l.info.State) {
				out = append(out, l)
			}
		}
	}
	return out, nil, nil
}

// overlayListed gives each live row of an owner the state its owner's start set
// records for it.
func (s *Store) overlayListed(ctx context.Context, tx queryer, rows []listed) error {
	ts := make([]ownedTask, len(rows))
	for i := range rows {
		ts[i] = ownedTask{StoredTask: rows[i].info.StoredTask, owner: rows[i].info.Owner}
	}
	if err := s.overlaySets(ctx, tx, ts); err != nil {
		return err
	}
	for i := range rows {
		rows[i].info.StoredTask = ts[i].StoredTask
	}
	return nil
}

// LookupTask implements [store.TaskLister.LookupTask]: one read by primary key, the
// payload left out unless asked for, then the owner's start set when the task is
// live and has an owner, outside a transaction.
func (s *Store) LookupTask(ctx context.Context, id string, payload bool) (store.TaskInfo, error) {
	if err := s.checkOpen("lookup task"); err != nil {
		return store.TaskInfo{}, err
	}
	cols := listColumns
	if payload {
		cols = columns + ", owner, LENGTH(payload), priority, run_at"
	}
	stmt := newQuery(256).raw("SELECT " + cols + ", result, history FROM ").raw(s.table).raw(" WHERE id = ").hexString(id).String()
	var (
		rows  []listed
		found bool
	)
	err := s.retry(ctx, "lookup task", func() error {
		rows, found = rows[:0], false
		err := scanAll(ctx, s.db, stmt, func(sc scanner) error {
			var (
				size  int
				prio  uint8
				runAt int64
				owner uint64
				res   []byte
				hist  []byte
			)
			t, err := scanTaskWith(sc, &owner, &size, &prio, &runAt, &res, &hist)
			if !payload {
				t.Payload = nil
			}
			t.Result, t.History = res, decodeHistory(hist)
			rows, found = append(rows, listed{info: store.TaskInfo{StoredTask: t, Owner: owner, PayloadSize: size}}), true
			return err
		})
		if err != nil || !found {
			return err
		}
		return s.overlayListed(ctx, s.db, rows)
	})
	if err != nil {
		return store.TaskInfo{}, err
	}
	if !found {
		return store.TaskInfo{}, fmt.Errorf("mysqlstore: lookup task %q: %w", id, store.ErrUnknownTask)
	}
	return rows[0].info, nil
}
