package flow

import "time"

// RunInfo is one durable run of a flow as an operator sees it ([Durable.Inspect], [Durable.List]).
type RunInfo struct {
	ID      string // the run's ID, from [Durable.Start]
	Flow    string // the flow's name
	State   State
	Created time.Time     // when Start stored it
	Ended   time.Time     // when it ended; zero while Running
	Err     string        // why it failed, empty otherwise
	Stages  []StageStatus // in definition order
}
