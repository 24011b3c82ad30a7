package mysqlstore_test

import (
	"time"

	"github.com/axsched/ax/kernel"
)

type kernelChange = kernel.Change

var testNow = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func insertChange(id string, payload []byte) kernel.Change {
	return kernel.Change{Op: kernel.OpInsert, Task: kernel.StoredTask{
		ID: id, Kind: "test.kind", Payload: payload, State: kernel.Queued, Fence: 1,
		RunAt: testNow, CreatedAt: testNow, UpdatedAt: testNow,
	}}
}

func keyedInsert(id, key string) kernel.Change {
	c := insertChange(id, []byte(id))
	c.Task.UniqueKey = key
	return c
}
