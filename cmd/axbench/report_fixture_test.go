package main

import "github.com/axsched/ax/bench"

// fixtureResult is a result with the given medians (min = max = median).
func fixtureResult(exec, mode string, metrics map[string]float64, series ...bench.Series) bench.Result {
	r := bench.Result{Executor: exec, Mode: mode, Metrics: map[string]bench.Stat{}, Series: series}
	for k, v := range metrics {
		r.Metrics[k] = bench.Stat{Median: v, Min: v, Max: v}
	}
	return r
}

// floodFixture is a flood report: ax, the strict-priority pool that starves
// Low, FIFO pools waiting seconds, and ants-nb, which refused tasks and so has
// the lowest waits.
func floodFixture() bench.Report {
	m := func(p50, p99, normal, low, rejected float64) map[string]float64 {
		return map[string]float64{
			"wait_p50_us_high": p50, "wait_p99_us_high": p99, "wait_p99_us_normal": normal,
			"share_low": low, "rejected": rejected, "timed_out": 0, "lost": 0,
		}
	}
	wait := func(v ...float64) bench.Series {
		s := bench.Series{Name: "wait_p99_us_high", Unit: "µs"}
		for i, x := range v {
			s.T = append(s.T, float64(i+1)/10)
			s.V = append(s.V, x)
		}
		return s
	}
	return bench.Report{
		Scenario: "flood", Doc: "a Low flood with High and Normal arriving", Reps: 1,
		Params: bench.Params{N: 16400, Conc: 100, Queue: 10000, Duration: 2e9, Scale: 1},
		Results: []bench.Result{
			fixtureResult("ax", "blocking", m(9100, 17700, 305000, 0.041, 0), wait(15000, 18000, 16000)),
			fixtureResult("priopool", "blocking", m(558, 3380, 242000, 0, 0), wait(3000, 3500, 3200)),
			fixtureResult("chanpool", "blocking", m(410000, 743000, 743000, 0.732, 0), wait(300000, 600000, 743000)),
			fixtureResult("pond", "blocking", m(412000, 751000, 751000, 0.731, 0), wait(300000, 610000, 751000)),
			fixtureResult("workerpool", "unbounded", m(409000, 740000, 740000, 0.733, 0), wait(300000, 590000, 740000)),
			fixtureResult("ants-nb", "non-blocking", m(4.2, 868, 333, 0.809, 6178), wait(5, 900, 12)),
		},
	}
}

// throughputFixture is a noop report, whose headline is higher-is-better.
func throughputFixture() bench.Report {
	m := func(tps, allocs float64) map[string]float64 {
		return map[string]float64{"tasks_per_sec": tps, "ns_per_task": 1e9 / tps, "allocs_per_task": allocs}
	}
	return bench.Report{
		Scenario: "noop", Doc: "no-op tasks", Reps: 3,
		Results: []bench.Result{
			fixtureResult("ax", "blocking", m(2.1e6, 1)),
			fixtureResult("chanpool", "blocking", m(1.9e6, 1)),
			fixtureResult("pond", "blocking", m(1.2e6, 2)),
		},
	}
}

// durableFixture is a durable report: ax-memstore without a server, ax on
// MariaDB and river with their servers' CPU, and asynq, whose server could not
// be read.
func durableFixture() bench.Report {
	m := func(bulk, clientBulk, serverBulk, callers, clientCallers, serverCallers float64) map[string]float64 {
		out := map[string]float64{
			"tasks_per_sec_bulk": bulk, "tasks_per_sec_callers": callers, "ack_p99_us_callers": 9000, "lost": 0,
			"client_cpu_us_per_task_bulk": clientBulk, "client_cpu_us_per_task_callers": clientCallers,
		}
		if serverBulk > 0 {
			out["server_cpu_us_per_task_bulk"], out["server_cpu_us_per_task_callers"] = serverBulk, serverCallers
		}
		return out
	}
	asynq := fixtureResult("asynq-redis", "blocking", m(4100, 233, 0, 3900, 240, 0))
	asynq.Notes = []string{"server CPU not measured: no process named redis-server or valkey-server under /proc (is the server on this machine?)"}
	return bench.Report{
		Scenario: "durable", Doc: "durable no-op tasks end to end", Reps: 1,
		Params: bench.Params{N: 20000, Conc: 100, Queue: 10000, Scale: 1},
		Results: []bench.Result{
			fixtureResult("ax-memstore", "blocking", m(250000, 11.5, 0, 90000, 14.2, 0)),
			fixtureResult("ax-mariadb-ack", "blocking", m(5100, 47.25, 183.4, 15200, 52, 71.6)),
			fixtureResult("river-pg", "blocking", m(9800, 121, 65.5, 2400, 310, 402)),
			asynq,
		},
	}
}
