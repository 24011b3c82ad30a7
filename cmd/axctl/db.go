package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

// db is the database target (--dsn): a mysqlstore.Store on the task table.
type db struct {
	s *mysqlstore.Store
}

var _ backend = (*db)(nil)

// triggerTries bounds how often trigger reads the schedule again when its next
// time moved under it (a kernel fired it meanwhile).
const triggerTries = 5

// openDB opens the store on dsn with o. It never deletes completed tasks (the
// store's purger is off) and creates no table (migrate does).
func openDB(dsn string, o mysqlstore.Options) (*db, error) {
	table := o.Table
	o.Retention = -1
	s, err := mysqlstore.Open(dsn, o)
	if err != nil {
		var oe *mysqlstore.OptionError
		if errors.As(err, &oe) && oe.Field == "Options.Table" {
			return nil, usagef("--table = %q: %s", table, oe.Reason)
		}
		return nil, usagef("--dsn: %v", err)
	}
	return &db{s: s}, nil
}

func (d *db) close() error { return d.s.Close() }

// wrap makes err clearer: a missing table names --table and migrate.
func (d *db) wrap(err error) error {
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1146 {
		return fmt.Errorf("table %s does not exist in that database: give --table, or create it with axctl migrate: %w", d.s.Table(), err)
	}
	return err
}

// ownerNames maps the store's owners' epochs to their names.
func (d *db) ownerNames(ctx context.Context) (map[uint64]string, []store.OwnerInfo, error) {
	os, err := d.s.Owners(ctx)
	if err != nil {
		return nil, nil, d.wrap(err)
	}
	names := make(map[uint64]string, len(os))
	for _, o := range os {
		names[o.Epoch] = o.Name
	}
	return names, os, nil
}

// ownerQuery sets q's owner filter from --owner: "pool", an epoch, or a name (its
// live owner's epoch, else its latest).
func ownerQuery(q *store.TaskQuery, owner string, os []store.OwnerInfo) error {
	switch owner {
	case "":
		return nil
	case "pool":
		q.Pool = true
		return nil
	}
	if n, err := strconv.ParseUint(owner, 10, 64); err == nil && n > 0 {
		q.Owner = n
		return nil
	}
	var best *store.OwnerInfo
	for i := range os {
		o := &os[i]
		if o.Name == owner && (best == nil || (o.Live && !best.Live) || (o.Live == best.Live && o.Epoch > best.Epoch)) {
			best = o
		}
	}
	if best == nil {
		return notFoundf("--owner = %q: no owner of that name (axctl owners lists them); give a name, an epoch or pool", owner)
	}
	q.Owner = best.Epoch
	return nil
}

func (d *db) tasks(ctx context.Context, f taskFilter) (taskPage, error) {
	names, os, err := d.ownerNames(ctx)
	if err != nil {
		return taskPage{}, err
	}
	q := store.TaskQuery{Kind: f.kind, Group: f.group, Key: f.key, After: f.after, Before: f.before, Limit: f.limit}
	if f.state != "" {
		q.State = stateOf(f.state)
	}
	if err := ownerQuery(&q, f.owner, os); err != nil {
		return taskPage{}, err
	}
	p, err := d.s.ListTasks(ctx, q)
	if errors.Is(err, store.ErrInvalidQuery) {
		return taskPage{}, usagef("%s", strings.TrimPrefix(err.Error(), "store: invalid query: "))
	}
	if err != nil {
		return taskPage{}, d.wrap(err)
	}
	out := taskPage{Tasks: make([]taskRow, len(p.Tasks)), Next: p.Next, Prev: p.Prev}
	for i := range p.Tasks {
		out.Tasks[i] = taskRowOfInfo(&p.Tasks[i], names)
	}
	return out, nil
}

// stateOf is the state named s, or 0.
func stateOf(s string) store.State {
	for st := store.Delayed; st <= store.Abandoned; st++ {
		if st.String() == s {
			return st
		}
	}
	return 0
}

func (d *db) task(ctx context.Context, id string) (taskRow, error) {
	t, err := d.s.LookupTask(ctx, id, false)
	if err != nil {
		if errors.Is(err, store.ErrUnknownTask) {
			return taskRow{}, notFoundf("no task %q in %s", id, d.s.Table())
		}
		return taskRow{}, d.wrap(err)
	}
	var names map[uint64]string
	if t.Owner != 0 {
		if names, _, err = d.ownerNames(ctx); err != nil {
			return taskRow{}, err
		}
	}
	return taskRowOfInfo(&t, names), nil
}

func (d *db) deadLetters(ctx context.Context, limit int, after string) (taskPage, error) {
	ts, err := d.s.DeadLetters(ctx, limit+1, after)
	if err != nil {
		return taskPage{}, d.wrap(err)
	}
	return pageOf(ts, limit), nil
}

// pageOf makes a page of the first limit of ts, which holds one more when a next
// page follows.
func pageOf(ts []store.StoredTask, limit int) taskPage {
	p := taskPage{Tasks: make([]taskRow, 0, min(len(ts), limit))}
	for i := range ts[:min(len(ts), limit)] {
		p.Tasks = append(p.Tasks, taskRowOf(&ts[i]))
	}
	if len(ts) > limit {
		p.Next = p.Tasks[limit-1].ID
	}
	return p
}

// requeue requeues ids at the store's time, into the pool: the next claim of a
// kernel with room for their kind runs them.
func (d *db) requeue(ctx context.Context, ids []string) (int, error) {
	now, err := d.s.Now(ctx)
	if err != nil {
		return 0, d.wrap(err)
	}
	ts, err := d.s.Requeue(ctx, now, ids...)
	return len(ts), d.wrap(err)
}

func (d *db) purge(ctx context.Context, ids []string) (int, error) {
	n, err := d.s.Purge(ctx, ids...)
	return n, d.wrap(err)
}

func (d *db) owners(ctx context.Context) ([]ownerRow, error) {
	os, err := d.s.Owners(ctx)
	if err != nil {
		return nil, d.wrap(err)
	}
	out := make([]ownerRow, len(os))
	for i, o := range os {
		out[i] = ownerRow{Name: o.Name, Epoch: o.Epoch, LeaseMS: o.Lease.Milliseconds(), Expires: utc(o.Expires), Live: o.Live, Tasks: &o.Tasks}
	}
	return out, nil
}

func (d *db) schedules(ctx context.Context) ([]scheduleRow, error) {
	var out []scheduleRow
	after := ""
	for {
		page, err := d.s.Schedules(ctx, limitMax, after)
		if err != nil {
			return nil, d.wrap(err)
		}
		for _, sc := range page {
			out = append(out, scheduleRow{
				Name: sc.Name, Spec: sc.Spec, Next: utc(sc.Next), Last: utc(sc.Last), Paused: sc.Paused,
				Ended: sc.Next.IsZero(), Version: sc.Version, UpdatedAt: utc(sc.UpdatedAt),
			})
		}
		if len(page) < limitMax {
			return out, nil
		}
		after = page[len(page)-1].Name
	}
}

func (d *db) unknownSchedule(name string, err error) error {
	if errors.Is(err, store.ErrUnknownSchedule) {
		return notFoundf("no schedule %q in %s", name, d.s.Table())
	}
	if errors.Is(err, store.ErrInvalidChange) {
		return usagef("schedule name %q: %v", name, err)
	}
	return d.wrap(err)
}

func (d *db) pauseSchedule(ctx context.Context, name string, paused bool) error {
	_, err := d.s.PauseSchedule(ctx, name, paused)
	return d.unknownSchedule(name, err)
}

// triggerSchedule fires one occurrence of the schedule now and keeps its next
// time, as schedule.Entry.Trigger does for a durable schedule: the occurrence is a
// copy of the schedule's last occurrence task (its kind, payload, priority,
// timeout, attempts, group and key, which the store does not keep with the
// schedule), due at the store's time, in the pool, where a kernel with its kind
// claims it. It is refused when the schedule is paused, or has no last
// occurrence to copy (it never fired, or its task was purged).
func (d *db) triggerSchedule(ctx context.Context, name string) error {
	for range triggerTries {
		sc, err := d.s.GetSchedule(ctx, name)
		if err != nil {
			return d.unknownSchedule(name, err)
		}
		if sc.Paused {
			return refusedf("schedule %q is paused: resume it first", name)
		}
		if sc.Last.IsZero() {
			return refusedf("schedule %q never fired: there is no occurrence to copy; trigger it from its kernel's console (--url)", name)
		}
		last, err := d.s.Get(ctx, store.OccurrenceID(name, sc.Last))
		if errors.Is(err, store.ErrUnknownTask) {
			return refusedf("schedule %q: its last occurrence (%s) was purged: there is nothing to copy; trigger it from its kernel's console (--url)",
				name, store.OccurrenceID(name, sc.Last))
		}
		if err != nil {
			return d.wrap(err)
		}
		now, err := d.s.Now(ctx)
		if err != nil {
			return d.wrap(err)
		}
		now = now.Truncate(time.Millisecond)
		occ := store.StoredTask{
			ID: store.OccurrenceID(name, now), Kind: last.Kind, Payload: last.Payload, Priority: last.Priority,
			RunAt: now, Timeout: last.Timeout, MaxAttempts: last.MaxAttempts, Fence: 1, Group: last.Group, Key: last.Key,
			State: store.Queued, CreatedAt: now, UpdatedAt: now,
		}
		_, fired, err := d.s.FireSchedule(ctx, store.ScheduleFire{
			Name: name, Expect: sc.Next, Next: sc.Next,
			Occurrences: []store.Change{{Op: store.OpInsert, Task: occ, Pool: true}},
		})
		if err != nil {
			return d.unknownSchedule(name, err)
		}
		if fired {
			return nil
		}
	}
	return fmt.Errorf("schedule %q: its next time kept moving under %d tries to fire it", name, triggerTries)
}

// migrate creates the store's tables, or checks and upgrades them.
func (d *db) migrate(ctx context.Context) error { return d.s.Migrate(ctx) }
