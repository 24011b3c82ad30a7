package main

import "github.com/axsched/ax/bench"

// column is one metric shown in a scenario's table.
type column struct {
	metric string // the metric's name in the report
	title  string // the column's heading
}

// view is how the table and the charts show one scenario: its columns, the
// headline metric compared with the best peer and with a baseline, and the
// metrics charted as bars.
type view struct {
	columns  []column
	headline string
	higher   bool     // a higher headline is better
	bars     []string // metrics drawn as one bar chart each
	baseline string   // the executor the headline is also divided by; if empty, chanpool
	legend   string   // printed under the table, if not empty
	// compact tables fit 100 columns: medians only, with units (15.9ms,
	// 4.8%), and no ratio columns (the conclusion gives them).
	compact bool
	// conclude, if not nil, returns the lines printed after the table.
	conclude func(rp bench.Report) []string
}

// views maps each scenario to its view. A scenario missing here is shown with
// all its metrics.
var views = map[string]view{
	"noop": {
		columns: []column{
			{"tasks_per_sec", "tasks/s"},
			{"ns_per_task", "ns/task"},
			{"allocs_per_task", "allocs/task"},
			{"bytes_per_task", "B/task"},
			{"peak_heap_mb", "peak heap MB"},
			{"peak_goroutines", "peak goroutines"},
		},
		headline: "tasks_per_sec", higher: true,
		bars: []string{"tasks_per_sec", "allocs_per_task"},
	},
	"sleep": {
		columns: []column{
			{"tasks_per_sec", "tasks/s"},
			{"efficiency", "efficiency"},
			{"allocs_per_task", "allocs/task"},
			{"peak_heap_mb", "peak heap MB"},
			{"peak_goroutines", "peak goroutines"},
		},
		headline: "efficiency", higher: true,
		bars: []string{"efficiency"},
	},
	"latency":       latencyView,
	"latency-yield": latencyView,
	"burst": {
		columns: []column{
			{"submit_ms", "submit ms"},
			{"submit_ns_per_task", "ns/submit"},
			{"reject_ns_per_op", "ns/refusal"},
			{"accepted", "accepted"},
			{"rejected", "rejected"},
			{"executed", "executed"},
			{"lost", "lost"},
		},
		headline: "submit_ns_per_task",
		bars:     []string{"submit_ns_per_task", "reject_ns_per_op"},
	},
	"mixed": {
		columns: []column{
			{"wait_p99_us_high", "High p99 µs"},
			{"wait_p99_us_normal", "Normal p99 µs"},
			{"wait_p99_us_low", "Low p99 µs"},
			{"wait_max_us_low", "Low max µs"},
			{"share_high", "High share"},
			{"share_normal", "Normal share"},
			{"share_low", "Low share"},
			{"share_error_pp_low", "Low off quota pp"},
			{"demand_high", "High demand"},
			{"rejected", "rejected"},
			{"lost", "lost"},
		},
		headline: "wait_p99_us_high", baseline: "priopool",
		bars:     []string{"wait_p99_us_high", "wait_p99_us_low", "wait_max_us_low"},
		legend:   "waits (µs) from the intended arrival to the start; shares: each priority's part of the starts while saturated; High demand: High's arrivals over the starts a second the executor reached while saturated; Low off quota pp: Low's share minus the share its quota promises, in percentage points",
		conclude: priorityConclusion,
	},
	"saturation": {
		columns: []column{
			{"wait_p50_us_high", "High p50 µs"},
			{"wait_p99_us_high", "High p99 µs"},
			{"wait_max_us_high", "High max µs"},
			{"wait_p50_us_normal", "Normal p50 µs"},
			{"wait_p99_us_normal", "Normal p99 µs"},
			{"wait_max_us_normal", "Normal max µs"},
			{"wait_p50_us_low", "Low p50 µs"},
			{"wait_p99_us_low", "Low p99 µs"},
			{"wait_max_us_low", "Low longest µs"},
			{"share_high", "High share"},
			{"share_normal", "Normal share"},
			{"share_low", "Low share"},
			{"ideal_wait_us", "ideal µs"},
			{"rejected", "rejected"},
			{"lost", "lost"},
		},
		headline: "wait_p99_us_high", baseline: "priopool",
		bars:     []string{"wait_p99_us_high", "ideal_wait_us", "wait_p99_us_normal", "wait_max_us_low"},
		legend:   "waits from the intended arrival, of the tasks due after the first tenth; shares: each priority's part of the starts then; ideal: the mean time between completions then, the wait of a High task that takes the next slot to free",
		conclude: priorityConclusion,
	},
	"flood": {
		columns: []column{
			{"wait_p50_us_high", "High p50"},
			{"wait_p99_us_high", "High p99"},
			{"wait_p99_us_normal", "Normal p99"},
			{"share_low", "Low share"},
			{"rejected", "refused"},
			{"timed_out", "timed out"},
			{"lost", "lost"},
		},
		headline: "wait_p99_us_high", baseline: "priopool", compact: true,
		bars:     []string{"wait_p99_us_high", "wait_p50_us_high", "wait_p99_us_normal"},
		legend:   "High p50/p99, Normal p99: the wait from a task's arrival to its start, 50th/99th percentile; Low share: Low's part of the starts while saturated; refused: tasks Submit turned away; timed out: tasks that outlived their timeout; lost: tasks accepted but never run",
		conclude: priorityConclusion,
	},
	"slow-upstream": {
		columns: []column{
			{"goodput_per_sec", "goodput/s"},
			{"wait_p99_us_high", "High p99 µs"},
			{"wait_p99_us_low", "Low p99 µs"},
			{"timed_out", "timed out"},
			{"timeout_overrun_p99_ms", "overrun p99 ms"},
			{"zombies_peak", "zombies"},
			{"rejected", "rejected"},
			{"peak_goroutines", "peak goroutines"},
			{"peak_heap_mb", "peak heap MB"},
			{"lost", "lost"},
		},
		headline: "goodput_per_sec", higher: true,
		bars: []string{"goodput_per_sec", "wait_p99_us_high", "timeout_overrun_p99_ms"},
	},
	"retry-storm": {
		columns: []column{
			{"amplification", "amplification"},
			{"attempts_per_task", "attempts/task"},
			{"attempts_per_sec_outage", "attempts/s outage"},
			{"attempts_per_sec_after", "attempts/s after"},
			{"drain_ms", "drain ms"},
			{"succeeded", "succeeded"},
			{"failed", "failed"},
			{"rejected", "rejected"},
			{"lost", "lost"},
		},
		headline: "drain_ms",
		bars:     []string{"amplification", "drain_ms"},
	},
	"timers": {
		columns: []column{
			{"schedule_ns_per_op", "schedule ns/op"},
			{"schedule_ns_per_op_near", "near ns/op"},
			{"bytes_per_timer", "B/timer"},
			{"lateness_p50_us", "late p50 µs"},
			{"lateness_p99_us", "late p99 µs"},
			{"idle_cpu_pct", "idle CPU %"},
		},
		headline: "schedule_ns_per_op",
		bars:     []string{"schedule_ns_per_op", "bytes_per_timer", "idle_cpu_pct"},
	},
	"durable": {
		columns: []column{
			{"tasks_per_sec_bulk", "bulk tasks/s"},
			{"ack_p50_us_bulk", "bulk ack p50 µs"},
			{"ack_p99_us_bulk", "bulk ack p99 µs"},
			{"rows_per_commit_bulk", "bulk rows/commit"},
			{"client_cpu_us_per_task_bulk", "bulk client CPU µs/task"},
			{"server_cpu_us_per_task_bulk", "bulk server CPU µs/task"},
			{"tasks_per_sec_callers", "callers tasks/s"},
			{"acks_per_sec_callers", "callers acks/s"},
			{"ack_p50_us_callers", "callers ack p50 µs"},
			{"ack_p99_us_callers", "callers ack p99 µs"},
			{"rows_per_commit_callers", "callers rows/commit"},
			{"client_cpu_us_per_task_callers", "callers client CPU µs/task"},
			{"server_cpu_us_per_task_callers", "callers server CPU µs/task"},
			{"lost", "lost"},
			{"peak_heap_mb", "peak heap MB"},
		},
		headline: "tasks_per_sec_bulk", higher: true, baseline: "ax-memstore",
		bars: []string{
			"tasks_per_sec_bulk", "tasks_per_sec_callers", "ack_p99_us_callers",
			"server_cpu_us_per_task_bulk", "server_cpu_us_per_task_callers",
		},
		legend: durableLegend,
	},
	"durable-multi": {
		columns: []column{
			{"tasks_per_sec_p1", "1 proc tasks/s"},
			{"ack_p50_us_p1", "1 proc ack p50 µs"},
			{"ack_p99_us_p1", "1 proc ack p99 µs"},
			{"tasks_per_sec_p2", "2 procs tasks/s"},
			{"ack_p50_us_p2", "2 procs ack p50 µs"},
			{"ack_p99_us_p2", "2 procs ack p99 µs"},
			{"tasks_per_sec_p3", "3 procs tasks/s"},
			{"ack_p50_us_p3", "3 procs ack p50 µs"},
			{"ack_p99_us_p3", "3 procs ack p99 µs"},
			{"ratio_p3_p1", "3 ÷ 1 procs"},
			{"lost", "lost"},
		},
		headline: "tasks_per_sec_p3", higher: true,
		bars: []string{"tasks_per_sec_p1", "tasks_per_sec_p2", "tasks_per_sec_p3", "ack_p99_us_p3"},
	},
	"durable-tx": {
		columns: []column{
			{"tasks_per_sec_tx", "tasks/s"},
			{"acks_per_sec_tx", "acks/s"},
			{"ack_p50_us_tx", "ack p50 µs"},
			{"ack_p99_us_tx", "ack p99 µs"},
			{"client_cpu_us_per_task_tx", "client CPU µs/task"},
			{"server_cpu_us_per_task_tx", "server CPU µs/task"},
			{"lost", "lost"},
		},
		headline: "tasks_per_sec_tx", higher: true,
		bars: []string{"tasks_per_sec_tx", "ack_p99_us_tx", "server_cpu_us_per_task_tx"},
	},
	"groups": {
		columns: []column{
			{"max_conc_per_key", "max conc/key"},
			{"max_conc_hang_key", "hang key conc"},
			{"rate_dev_pct_max", "rate dev %"},
			{"rate_excess_pct_max", "rate excess %"},
			{"rate_mean_dev_pct_max", "mean rate dev %"},
			{"wait_p99_us", "p99 wait µs"},
			{"wait_p99_us_nobad", "p99 no bad µs"},
			{"wait_ratio", "wait ratio"},
			{"overhead_ns_per_task", "CPU ns/task"},
			{"fail_key_calls", "fail calls"},
			{"fail_calls_open_max", "open calls"},
			{"breaker_opened", "trips"},
			{"timed_out", "timed out"},
			{"stall_max_ms", "stall max ms"},
		},
		headline: "overhead_ns_per_task", baseline: "chanpool-keyed", compact: true,
		bars: []string{"overhead_ns_per_task", "wait_p99_us", "wait_p99_us_nobad", "rate_dev_pct_max"},
		legend: "max conc/key: the most calls one key had open at the server (the hanging key apart: the server sees its " +
			"abandoned calls late); rate dev/excess: the largest deviation (excess) of a backlogged key's start rate from 100/s " +
			"over any window of >= 10 starts; mean rate dev: the same over a key's whole backlog; p99 wait: the cold " +
			"keys' submit→start, with the bad keys and without (each over two runs: with, without, without, with); " +
			"CPU ns/task: process CPU per instant task under the limits; open calls: the most calls at the failing key " +
			"in one open spell of its breaker (trip to close or reopen, half-open probes included); stall max: the latest a " +
			"goroutine sleeping 1 ms at a time woke during the calls, beyond its sleep (the whole process held back: the " +
			"machine's other jobs, GC), which delays every executor's starts alike",
		conclude: groupsConclusion,
	},
	"schedules": {
		columns: []column{
			{"bytes_per_schedule", "B/sched"},
			{"add_ns_per_op", "add ns"},
			{"idle_cpu_pct", "idle CPU%"},
			{"lateness_p50_us", "late p50"},
			{"lateness_p99_us", "late p99"},
			{"wakeup_p99_us", "wake p99"},
			{"cpu_ns_per_fire", "CPU ns/fire"},
			{"unfired", "unfired"},
		},
		headline: "bytes_per_schedule", baseline: "gocron", compact: true,
		bars: []string{"bytes_per_schedule", "idle_cpu_pct", "lateness_p99_us", "cpu_ns_per_fire"},
		legend: "B/sched: heap and stack bytes in use after a GC per idle schedule (1–60 min, none due); idle CPU%: " +
			"process CPU over 1 s with them all live, % of one core; late: fire time − the schedule's own target " +
			"(first target + k × interval) for the firing schedules (1–60 s ÷ shrink); wake: time.AfterFunc(2ms) " +
			"lateness in the same process, one at a time; CPU ns/fire: process CPU over the firing window ÷ fires",
		conclude: schedulesConclusion,
	},
	"flows": {
		columns: []column{
			{"flow_wall_p50_us", "flow p50 µs"},
			{"hand_wall_p50_us", "hand p50 µs"},
			{"wall_ratio", "ratio"},
			{"overhead_us_per_stage", "µs/stage"},
			{"flow_cpu_us_per_task", "flow CPU µs/task"},
			{"hand_cpu_us_per_task", "hand CPU µs/task"},
		},
		headline: "overhead_us_per_stage", compact: true,
		bars: []string{"flow_wall_p50_us", "hand_wall_p50_us", "flow_cpu_us_per_task", "hand_cpu_us_per_task"},
		legend: "one pipeline, fetch → 64 shards of clean → store (66 tasks), run N times as a flow on ax and as " +
			"many times by hand (errgroup and channels), alternating in one process: p50: wall time per pipeline; " +
			"µs/stage: (flow p50 − hand p50) ÷ 3 stages; CPU µs/task: process CPU while that side ran ÷ its tasks",
	},
	"flows-durable": {
		columns: []column{
			{"flow_wall_p50_us", "flow p50"},
			{"hand_wall_p50_us", "hand p50"},
			{"overhead_us_per_stage", "per stage"},
			{"flows_per_sec", "flows/s"},
			{"inflight_wall_p50_us", "4 in flight p50"},
			{"client_cpu_us_per_task", "client CPU/task"},
			{"server_cpu_us_per_task", "server CPU/task"},
			{"reruns", "reruns"},
		},
		headline: "flows_per_sec", higher: true, baseline: "ax-flow-mem", compact: true,
		bars: []string{"flow_wall_p50_us", "flows_per_sec", "client_cpu_us_per_task", "server_cpu_us_per_task"},
		legend: "one pipeline, fetch → 64 shards of clean → store (66 tasks), durable: flow p50: wall time from " +
			"the start of a flow to its end, one flow at a time, alternating with the pipeline by hand in memory " +
			"(hand p50, errgroup and channels); per stage: (flow p50 − hand p50) ÷ 3; flows/s and 4 in flight " +
			"p50: N more flows, 4 at a time; CPU/task: user + system CPU of axbench's process (client) and of " +
			"the database server's processes (server, /proc) over those N flows ÷ their tasks; reruns: task " +
			"runs beyond one per task",
		conclude: flowsDurableConclusion,
	},
}

// latencyView shows both latency scenarios, one per generator.
var latencyView = view{
	columns: []column{
		{"wait_p50_us", "p50 µs"},
		{"wait_p90_us", "p90 µs"},
		{"wait_p99_us", "p99 µs"},
		{"wait_p999_us", "p99.9 µs"},
		{"wait_max_us", "max µs"},
		{"wait_intended_p99_us", "p99 from due µs"},
		{"wait_intended_p999_us", "p99.9 from due µs"},
		{"rejected", "rejected"},
		{"lost", "lost"},
	},
	headline: "wait_p99_us",
	bars:     []string{"wait_p50_us", "wait_p99_us", "wait_p999_us", "wait_intended_p99_us"},
}

// durableLegend explains the durable scenario's CPU columns.
const durableLegend = "client CPU µs/task: the user + system CPU time of axbench's process (the kernel and its " +
	"journal, or river's or asynq's client and workers, and the driver) from the first submit until every " +
	"completion is stored, ÷ the tasks; server CPU µs/task: the same of the database server's processes, read " +
	"from /proc/PID/stat (mariadbd for ax-mariadb-*, every postgres process for river-pg, redis-server for " +
	"asynq-redis), all their work in that time, other clients' included; –: no server (ax-memstore), or not " +
	"readable (a note says why)"
