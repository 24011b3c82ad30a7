package flow

import "sync"

// Inputs gives a stage's functions the results of the stages it follows. The
// zero Inputs reads nothing. Safe for concurrent use.
type Inputs struct {
	r     *run
	stage int
	d     *durIn // a durable run's
}

// Result returns the result of the stage named name, if that stage is one this
// stage depends on, directly or through others, and returned one; nil
// otherwise (a sharded stage returns none). The slice is shared: do not modify
// it.
func (in Inputs) Result(name string) []byte {
	if in.d != nil {
		return in.d.results[name]
	}
	if in.r == nil {
		return nil
	}
	j, ok := in.r.index[name]
	if !ok || !in.r.upstream(in.stage, j) {
		return nil
	}
	return in.r.res.get(j)
}

// Input returns the input of a durable run ([Durable.Start]); nil for a run in
// memory. The slice is shared: do not modify it.
func (in Inputs) Input() []byte {
	if in.d == nil {
		return nil
	}
	return in.d.input
}

// RunID returns the ID of a durable run ([Durable.Start]), the same in every
// attempt of every stage of the run: with the stage, the shard and
// kernel.TaskInfo's Attempt, a key for idempotent work. It is "" for a run in
// memory.
func (in Inputs) RunID() string {
	if in.d == nil {
		return ""
	}
	return in.d.run
}

// Flow returns the name of the flow the stage belongs to.
func (in Inputs) Flow() string {
	if in.d != nil {
		return in.d.flow
	}
	if in.r == nil {
		return ""
	}
	return in.r.f.name
}

// results keeps the stages' results of a run. A kernel that keeps task
// results can take the place of memResults behind it.
type results interface {
	// put records the result an attempt of stage returned with a nil error; a
	// later attempt's replaces an earlier one's, never the reverse.
	put(stage, attempt int, b []byte)
	// get returns the stage's result.
	get(stage int) []byte
}

// memResults keeps results in memory, for the life of the run's Handle.
type memResults struct {
	mu  sync.Mutex
	res [][]byte // by stage
	att []int    // the attempt each result came from
}

func newMemResults(n int) *memResults {
	return &memResults{res: make([][]byte, n), att: make([]int, n)}
}

func (m *memResults) put(stage, attempt int, b []byte) {
	m.mu.Lock()
	if attempt >= m.att[stage] {
		m.res[stage], m.att[stage] = b, attempt
	}
	m.mu.Unlock()
}

func (m *memResults) get(stage int) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.res[stage]
}
