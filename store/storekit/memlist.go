package storekit

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/axsched/ax/store"
)

var _ store.TaskLister = (*MemoryStore)(nil)

// ListTasks implements [store.TaskLister.ListTasks]: the tasks in ID order, each page
// a pass over every task under the mutex (a memory store has no index to bound it).
// Its cursors are an ID, base64url-encoded.
func (s *MemoryStore) ListTasks(ctx context.Context, q store.TaskQuery) (store.TaskPage, error) {
	if err := q.Validate(); err != nil {
		return store.TaskPage{}, fmt.Errorf("storekit: memory store: list tasks: %w", err)
	}
	after, err := memCursor("After", q.After)
	if err != nil {
		return store.TaskPage{}, fmt.Errorf("storekit: memory store: list tasks: %w", err)
	}
	before, err := memCursor("Before", q.Before)
	if err != nil {
		return store.TaskPage{}, fmt.Errorf("storekit: memory store: list tasks: %w", err)
	}
	var all []store.TaskInfo
	err = s.read(ctx, "list tasks", func() {
		for id, t := range s.tasks {
			if q.After != "" && id <= after || q.Before != "" && id >= before {
				continue
			}
			owner := s.owner[id]
			if q.Matches(t, owner) {
				all = append(all, s.infoLocked(t, false))
			}
		}
	})
	if err != nil {
		return store.TaskPage{}, err
	}
	slices.SortFunc(all, func(a, b store.TaskInfo) int { return strings.Compare(a.ID, b.ID) })
	return pageOf(all, q, func(t *store.TaskInfo) string { return memCursorOf(t.ID) }), nil
}

// pageOf cuts the page q asks for out of all, the tasks that match q's filters and lie
// beyond its cursor, in the store's order: the first q.PageSize() of them, or the last
// ones for a q.Before. cursor makes the cursor of a task.
func pageOf(all []store.TaskInfo, q store.TaskQuery, cursor func(*store.TaskInfo) string) store.TaskPage {
	n := q.PageSize()
	var p store.TaskPage
	switch {
	case q.Before != "":
		if len(all) > n {
			all = all[len(all)-n:]
			p.Prev = cursor(&all[0])
		}
		if len(all) > 0 {
			p.Next = cursor(&all[len(all)-1])
		}
	default:
		if len(all) > n {
			all = all[:n]
			p.Next = cursor(&all[n-1])
		}
		if q.After != "" && len(all) > 0 {
			p.Prev = cursor(&all[0])
		}
	}
	p.Tasks = all
	return p
}

// LookupTask implements [store.TaskLister.LookupTask].
func (s *MemoryStore) LookupTask(ctx context.Context, id string, payload bool) (store.TaskInfo, error) {
	var (
		out store.TaskInfo
		ok  bool
	)
	err := s.read(ctx, "lookup task", func() {
		var t *store.StoredTask
		if t, ok = s.tasks[id]; ok {
			out = s.infoLocked(t, payload)
			out.Result, out.History = slices.Clone(t.Result), slices.Clone(t.History)
		}
	})
	if err == nil && !ok {
		err = fmt.Errorf("storekit: memory store: lookup task %q: %w", id, store.ErrUnknownTask)
	}
	return out, err
}

// infoLocked returns t as a TaskInfo, with a copy of its payload when payload is true.
func (s *MemoryStore) infoLocked(t *store.StoredTask, payload bool) store.TaskInfo {
	info := store.TaskInfo{StoredTask: *t, Owner: s.owner[t.ID], PayloadSize: len(t.Payload)}
	info.Payload, info.Headers = nil, maps.Clone(t.Headers)
	info.Result, info.History = nil, nil // the store's: never shared
	if payload {
		info.Payload = slices.Clone(t.Payload)
	}
	return info
}

func memCursorOf(id string) string { return base64.RawURLEncoding.EncodeToString([]byte(id)) }

// memCursor decodes the cursor c of field; "" decodes to "".
func memCursor(field, c string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || c != "" && len(b) == 0 {
		return "", store.InvalidCursor(field, c)
	}
	return string(b), nil
}
