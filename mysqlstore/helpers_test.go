package mysqlstore_test

import (
	"time"

	"github.com/axsched/ax/store"
)

type kernelChange = store.Change

var testNow = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func insertChange(id string, payload []byte) store.Change {
	return store.Change{Op: store.OpInsert, Task: store.StoredTask{
		ID: id, Kind: "test.kind", Payload: payload, State: store.Queued, Fence: 1,
		RunAt: testNow, CreatedAt: testNow, UpdatedAt: testNow,
	}}
}

func keyedInsert(id, key string) store.Change {
	c := insertChange(id, []byte(id))
	c.Task.UniqueKey = key
	return c
}
