package store

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"
)

// ScheduleStore is a [Store] that keeps durable schedules: for each schedule, by name,
// the next target time, so that of several kernels on the store exactly one fires each
// occurrence, with no leader, and a kernel that starts computes its misfires from the
// stored time.
//
// It is an interface of its own, which the kernel detects as it detects [SharedStore],
// so that stores written for the Store and SharedStore contracts stay valid.
// storekit.MemoryStore and mysqlstore.Store implement it.
//
// # Firing once
//
// [ScheduleStore.FireSchedule] is one transaction: a compare-and-set of the stored next
// time (from the time the caller computed from to the one after the occurrences), and,
// only when it matched, the insert of the occurrences' tasks, whose IDs are
// [OccurrenceID] of the schedule and the target time. Of several callers firing the same
// occurrence, one sees its compare-and-set match; the others get fired = false and the
// stored schedule, and follow its next time. An occurrence's ID names it, so even a
// schedule set back in time never stores an occurrence twice.
//
// # Times
//
// Next times are kept with millisecond precision, like tasks' times: FireSchedule
// compares Expect with the stored time after truncating it to the millisecond. The zero
// time is a schedule with no next occurrence (it ended).
type ScheduleStore interface {
	Store

	// UpsertSchedule stores the schedule s.Name with next time s.Next and spec s.Spec
	// when the store holds no schedule of that name, and otherwise changes nothing. It
	// returns the stored schedule, and whether this call created it: a restarted kernel
	// gets the next time stored before it stopped and computes its misfires from it.
	// s.Paused is stored on creation.
	UpsertSchedule(ctx context.Context, s StoredSchedule) (stored StoredSchedule, created bool, err error)

	// FireSchedule fires the occurrences f.Occurrences of the schedule f.Name and moves
	// its next time from f.Expect to f.Next, in one transaction, when the stored next time
	// is f.Expect and the schedule is not paused; it then returns the schedule as it left
	// it and fired = true. Otherwise it changes nothing and returns the stored schedule and
	// fired = false: another caller fired that occurrence (follow the stored next time),
	// or the schedule is paused. With no occurrences, it only moves the next time (a
	// misfire skipped, or the schedule's spec changed).
	//
	// It returns an error wrapping [ErrUnknownSchedule] when no schedule has that name,
	// [ErrInvalidChange] (nothing written) for an invalid name or occurrence (see
	// [ScheduleFire]), and, with f.Owner set, [ErrLeaseLost] when that owner's lease
	// ended. When a try's outcome is unknown (the connection was lost as it committed), a
	// store finds out from the stored schedule whether that try fired.
	FireSchedule(ctx context.Context, f ScheduleFire) (stored StoredSchedule, fired bool, err error)

	// GetSchedule returns the stored schedule named name, or an error wrapping
	// [ErrUnknownSchedule].
	GetSchedule(ctx context.Context, name string) (StoredSchedule, error)

	// PauseSchedule sets the schedule's paused flag and returns the schedule. A paused
	// schedule keeps its next time and does not fire ([ScheduleStore.FireSchedule]
	// returns fired = false). It returns an error wrapping [ErrUnknownSchedule] when no
	// schedule has that name.
	PauseSchedule(ctx context.Context, name string, paused bool) (StoredSchedule, error)

	// DeleteSchedule deletes the schedule named name and reports whether it existed. The
	// tasks of its occurrences stay.
	DeleteSchedule(ctx context.Context, name string) (bool, error)
}

// StoredSchedule is a durable schedule as a [ScheduleStore] keeps it.
type StoredSchedule struct {
	// Name identifies the schedule: 1 to [ScheduleNameMax] bytes of ASCII letters,
	// digits and . _ - : (see [CheckScheduleName]).
	Name string
	// Spec describes the schedule, for people and diagnostics (a cron spec, "@every
	// 1m"); at most [ScheduleSpecMax] bytes. The store does not interpret it.
	Spec string
	// Next is the next target time, to the millisecond; the zero time when the schedule
	// has none.
	Next time.Time
	// Paused reports whether the schedule is paused.
	Paused bool
	// Last is the latest target among the occurrences of the last fire that had any,
	// to the millisecond; the zero time before the first. The task of that occurrence
	// is OccurrenceID(Name, Last): a kernel reads its state to keep occurrences from
	// overlapping (OverlapSkip).
	Last time.Time
	// Version counts the changes of the schedule since it was created.
	Version uint64
	// UpdatedAt is when the schedule last changed, on the store's clock.
	UpdatedAt time.Time
}

// ScheduleFire is what [ScheduleStore.FireSchedule] takes.
type ScheduleFire struct {
	// Name is the schedule's name.
	Name string
	// Expect is the next time the caller computed the occurrences from: the stored one
	// it read.
	Expect time.Time
	// Next is the next time to store: the first target after the occurrences. The zero
	// time ends the schedule.
	Next time.Time
	// Spec, when not empty, replaces the stored spec.
	Spec string
	// Owner, when not nil, is the [SharedStore] owner firing: the fire renews its lease
	// as [SharedStore.CommitAs] does and fails with [ErrLeaseLost] when it ended, and the
	// occurrences' tasks belong to it (unless a Change sets Pool). When nil, the tasks
	// go to the pool (see [SharedStore]). A store that is no SharedStore ignores it.
	Owner *Owner
	// Occurrences are the tasks to insert: each an [OpInsert] whose Task.ID is
	// [OccurrenceID] of Name and a target time, with no UniqueKey (the ID is the
	// occurrence's key). At most [ScheduleFireMax] of them.
	Occurrences []Change
}

// Limits of a [ScheduleStore].
const (
	// ScheduleNameMax is the longest schedule name, in bytes: its occurrence IDs fit in
	// [StoredIDMax].
	ScheduleNameMax = 100
	// ScheduleSpecMax is the longest spec a store keeps, in bytes.
	ScheduleSpecMax = 255
	// ScheduleFireMax is the most occurrences one [ScheduleStore.FireSchedule] inserts.
	ScheduleFireMax = 10_000
)

// ErrUnknownSchedule: the store holds no schedule of that name. Returned (wrapped) by
// [ScheduleStore.FireSchedule], [ScheduleStore.GetSchedule] and
// [ScheduleStore.PauseSchedule].
var ErrUnknownSchedule = errors.New("store: unknown schedule")

// OccurrenceID returns the task ID of the occurrence of the schedule name due at at:
// "sched/<name>/<unix ms>". It is the same in every process, so an occurrence is stored
// once whoever fires it.
func OccurrenceID(name string, at time.Time) string {
	return "sched/" + name + "/" + strconv.FormatInt(at.UnixMilli(), 10)
}

// ParseOccurrenceID returns the schedule name and the target time of an occurrence ID
// made by [OccurrenceID], and ok = false for any other ID. The target is in UTC, to
// the millisecond.
func ParseOccurrenceID(id string) (name string, target time.Time, ok bool) {
	rest, ok := strings.CutPrefix(id, "sched/")
	if !ok {
		return "", time.Time{}, false
	}
	i := strings.LastIndexByte(rest, '/')
	if i < 0 {
		return "", time.Time{}, false
	}
	ms, err := strconv.ParseInt(rest[i+1:], 10, 64)
	if err != nil || CheckScheduleName(rest[:i]) != nil {
		return "", time.Time{}, false
	}
	return rest[:i], time.UnixMilli(ms).UTC(), true
}

// Last returns the latest target among f's occurrences (parsed from their IDs), or
// the zero time when it has none: what a [ScheduleStore] stores as the schedule's
// Last when f fires.
func (f *ScheduleFire) Last() time.Time {
	var last time.Time
	for i := range f.Occurrences {
		if _, at, ok := ParseOccurrenceID(f.Occurrences[i].Task.ID); ok && at.After(last) {
			last = at
		}
	}
	return last
}

// CheckScheduleName returns nil for a valid schedule name, and otherwise an error
// whose message says why, starting "store: schedule name": a name is 1 to
// [ScheduleNameMax] bytes of ASCII letters, digits, '.', '_', '-' and ':'.
func CheckScheduleName(name string) error {
	bad := func(reason string) error {
		v := name
		if len(v) > ScheduleNameMax {
			v = v[:ScheduleNameMax] + "..."
		}
		return errors.New("store: schedule name " + strconv.Quote(v) + ": " + reason)
	}
	switch {
	case name == "":
		return bad("must not be empty")
	case len(name) > ScheduleNameMax:
		return bad(strconv.Itoa(len(name)) + " bytes: must be at most " + strconv.Itoa(ScheduleNameMax) + " bytes (ScheduleNameMax)")
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !scheduleNameByte(c) {
			return bad("byte " + strconv.Itoa(i) + " is " + strconv.QuoteRune(rune(c)) + ": only ASCII letters, digits and . _ - : are allowed")
		}
	}
	return nil
}

// Validate checks f without looking at any store: the name, the spec's length, and each
// occurrence (a valid [OpInsert] with the ID [OccurrenceID] of the schedule at some time
// and no unique key), at most [ScheduleFireMax] of them. It returns nil or an error
// wrapping [ErrInvalidChange] that names the field; a ScheduleStore refuses the same
// ScheduleFire with it, before writing anything.
func (f *ScheduleFire) Validate() error {
	if err := CheckScheduleName(f.Name); err != nil {
		return invalidFire(err.Error())
	}
	if len(f.Spec) > ScheduleSpecMax {
		return invalidFire("ScheduleFire.Spec: " + strconv.Itoa(len(f.Spec)) + " bytes: must be at most " + strconv.Itoa(ScheduleSpecMax) + " bytes (ScheduleSpecMax)")
	}
	if len(f.Occurrences) > ScheduleFireMax {
		return invalidFire("ScheduleFire.Occurrences: " + strconv.Itoa(len(f.Occurrences)) + " changes: must be at most " + strconv.Itoa(ScheduleFireMax) + " (ScheduleFireMax)")
	}
	prefix := "sched/" + f.Name + "/"
	for i := range f.Occurrences {
		c := &f.Occurrences[i]
		field := "ScheduleFire.Occurrences[" + strconv.Itoa(i) + "]"
		if c.Op != OpInsert {
			return invalidFire(field + ".Op: " + c.Op.String() + ": must be insert")
		}
		if err := c.Validate(); err != nil {
			return invalidFire(field + ": " + err.Error())
		}
		ms, ok := strings.CutPrefix(c.Task.ID, prefix)
		if _, err := strconv.ParseInt(ms, 10, 64); !ok || err != nil {
			return invalidFire(field + ".Task.ID: " + strconv.Quote(c.Task.ID) + ": must be OccurrenceID(" + strconv.Quote(f.Name) + ", target)")
		}
		if c.Task.UniqueKey != "" {
			return invalidFire(field + ".Task.UniqueKey: must be empty (the occurrence ID is its key)")
		}
	}
	return nil
}

func scheduleNameByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return c == '.' || c == '_' || c == '-' || c == ':'
}

func invalidFire(reason string) error {
	return &invalidFireError{reason: strings.TrimPrefix(reason, "store: ")}
}

type invalidFireError struct{ reason string }

func (e *invalidFireError) Error() string { return "store: invalid schedule fire: " + e.reason }

func (e *invalidFireError) Unwrap() error { return ErrInvalidChange }
