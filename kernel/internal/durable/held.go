package durable

import (
	"slices"

	"github.com/axsched/ax/store"
)

// FindHeld returns where the task id is among held, lists of stored tasks by name
// (tasks a kernel holds until their kind or group is there): the map, the name and
// the index, or a nil map when it is in none.
func FindHeld(id string, held ...map[string][]store.StoredTask) (map[string][]store.StoredTask, string, int) {
	for _, m := range held {
		for name, ts := range m {
			if i := slices.IndexFunc(ts, func(t store.StoredTask) bool { return t.ID == id }); i >= 0 {
				return m, name, i
			}
		}
	}
	return nil, "", -1
}
