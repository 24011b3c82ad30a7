package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/axsched/ax/kernel"
)

// The shape of the groups scenario.
const (
	groupsKeys        = 1000                   // keys in all
	groupsRateKeys    = 8                      // backlogged keys whose rate binds
	groupsConcKeys    = 8                      // backlogged keys whose concurrency binds
	groupsKeyConc     = 5                      // concurrency per key
	groupsKeyRate     = 100                    // starts per second per key
	groupsLongWork    = 100 * time.Millisecond // the work of a concurrency-bound key's calls
	groupsHangTimeout = 100 * time.Millisecond // the timeout of the hanging key's calls
	groupsTimeout     = 2 * time.Second        // the timeout of every other call
	groupsFailEvery   = 40                     // every 40th arrival goes to the failing key
	groupsWindow      = 10                     // the fewest starts of a window the rate is judged over
	groupsProbes      = 1                      // the breaker's probes
	groupsDrop        = 200 * time.Millisecond // after the other keys' tasks ended, the failing key's waiting ones are dropped
)

// Keys by index: the hanging key, the failing one, the rate-bound ones, the
// concurrency-bound ones, then the cold keys the open loop visits in turn.
const (
	keyHang  = 0
	keyFail  = 1
	keyRate0 = 2
	keyConc0 = keyRate0 + groupsRateKeys
	keyCold0 = keyConc0 + groupsConcKeys
)

// groupsBreaker is the failing key's breaker.
var groupsBreaker = BreakerSpec{
	Window: time.Second, MinCalls: 5, FailureRatio: 0.5,
	OpenFor: 50 * time.Millisecond, MaxOpenFor: 400 * time.Millisecond, Probes: groupsProbes,
}

func groupsScenario() Scenario {
	return Scenario{
		Name: "groups",
		Key:  "wait_p99_us",
		Doc: "1,000 keys limited to 5 concurrent and 100/s each, calling 127.0.0.1: one key hangs, one fails (breaker); " +
			"observed per-key concurrency and rate, other keys' p99 wait with the bad keys ÷ without, " +
			"attempts at the failing key while its breaker is open, CPU per task under the limits",
		Defaults: Params{N: 30_000, Conc: 500, Rate: 2000, Work: 2 * time.Millisecond, Duration: time.Second},
		Keyed:    true,
		Run:      runGroups,
	}
}

// keyName names key i on the wire and to the executor.
func keyName(i int) string { return "k" + strconv.Itoa(i) }

func runGroups(ctx context.Context, f Factory, p Params) (*Sample, error) {
	if p.Rate <= 0 || p.Duration <= 0 {
		return nil, errors.New("bench: groups needs rate > 0 and duration > 0")
	}
	out := newSample()
	lim := KeyLimits{Concurrency: groupsKeyConc, Rate: groupsKeyRate, Burst: 1}
	if err := groupsOverhead(ctx, f, p, lim, out); err != nil {
		return nil, err
	}
	// The calls run with the bad keys, without, without, with: each case once
	// first and once last, so that neither gains from its place in the process
	// (a warmer runtime, heap and box), and each p99 is over twice the arrivals.
	// A stall meter runs beside them (see stallMeter).
	var runs [4]*groupsRun
	sm := startStallMeter()
	for i, bad := range []bool{true, false, false, true} {
		r, err := groupsCalls(ctx, f, p, lim, bad)
		if err != nil {
			sm.end()
			return nil, err
		}
		runs[i] = r
	}
	stall, share := sm.end()
	out.Metrics["stall_max_ms"] = float64(stall.Microseconds()) / 1e3
	out.Metrics["stall_pct"] = share * 100
	runs[0].report(out, p, lim)
	qBad := QuantilesOf(append(runs[0].coldWaits(), runs[3].coldWaits()...))
	qBad.put(out.Metrics, "wait", "")
	q := QuantilesOf(append(runs[1].coldWaits(), runs[2].coldWaits()...))
	out.Metrics["wait_p99_us_nobad"] = q.P99
	out.Metrics["wait_ratio"] = qBad.P99 / q.P99
	return out, nil
}

// groupsOverhead measures the CPU per task of p.N instant tasks spread over
// the keys in turn, under the limits lim: what the executor spends to keep them.
func groupsOverhead(ctx context.Context, f Factory, p Params, lim KeyLimits, out *Sample) error {
	ex, err := f.Keyed(ctx, p, KeyedConfig{Conc: p.Conc, Queue: p.Queue, PerKey: lim})
	if err != nil {
		return fmt.Errorf("bench: new %s: %w", f.Name, err)
	}
	defer ex.Close()
	names := make([]string, groupsKeys)
	for i := range names {
		names[i] = keyName(i)
	}
	var ran atomic.Int64
	run := func(context.Context) error {
		ran.Add(1)
		return nil
	}
	ms0 := memStats(true)
	cpu0 := processCPU()
	t0 := time.Now()
	accepted := int64(0)
	for i := range p.N {
		if ex.Submit(KeyedTask{Key: names[i%groupsKeys], Run: run}) == nil {
			accepted++
		}
	}
	ex.Wait()
	el := time.Since(t0)
	cpu := processCPU() - cpu0
	ms1 := memStats(false)
	n := float64(p.N)
	out.Metrics["overhead_ns_per_task"] = float64(cpu) / n
	out.Metrics["overhead_wall_ms"] = float64(el.Microseconds()) / 1e3
	out.Metrics["overhead_allocs_per_task"] = float64(ms1.Mallocs-ms0.Mallocs) / n
	out.Metrics["overhead_ideal_ms"] = math.Ceil(n/groupsKeys-1) / groupsKeyRate * 1e3
	if cpu < 0 {
		delete(out.Metrics, "overhead_ns_per_task")
	}
	if ran.Load() != accepted {
		out.note(fmt.Sprintf("overhead phase: accepted %d tasks but ran %d", accepted, ran.Load()))
	}
	return nil
}

// groupsServer is the upstream of the calls: GET /KEY?d=NS&m=MODE&s=NS
// answers after NS (m=ok), with a 500 after NS (m=fail), or never (m=hang);
// s is the caller's send time. It counts the calls each key has open.
type groupsServer struct {
	open, peak []atomic.Int32 // by key index
	mu         sync.Mutex
	failSent   []int64 // the send times of the calls to the failing key
}

func (s *groupsServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/k"))
	if err != nil || i < 0 || i >= len(s.open) {
		http.Error(w, "no such key", http.StatusNotFound)
		return
	}
	n := s.open[i].Add(1)
	defer s.open[i].Add(-1)
	for {
		m := s.peak[i].Load()
		if n <= m || s.peak[i].CompareAndSwap(m, n) {
			break
		}
	}
	q := r.URL.Query()
	mode := q.Get("m")
	if mode == "fail" {
		sent, _ := strconv.ParseInt(q.Get("s"), 10, 64)
		s.mu.Lock()
		s.failSent = append(s.failSent, sent)
		s.mu.Unlock()
	}
	if mode == "hang" {
		<-r.Context().Done()
		return
	}
	if d, _ := strconv.ParseInt(q.Get("d"), 10, 64); d > 0 {
		t := time.NewTimer(time.Duration(d))
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		}
	}
	if mode == "fail" {
		http.Error(w, "failing", http.StatusInternalServerError)
		return
	}
	_, _ = io.WriteString(w, "ok")
}

// groupsTask is what one call of the groups scenario recorded.
type groupsTask struct {
	key    int
	due    int64 // when it was submitted (ns since base); for a cold key, its intended arrival
	start  int64 // when it started (ns since base); 0 if it never did
	err    error
	called bool
}

// groupsRun is what one run of the calls measured.
type groupsRun struct {
	tasks      []groupsTask
	peak       []int32 // by key: the most calls open at the server
	clientPeak []int32 // by key: the most calls running in the executor
	failSent   []int64
	changes    []BreakerChange
	base       time.Time
	bad        bool
	elapsed    time.Duration
	breaker    bool // the executor reported breaker changes
}

// groupsCalls runs the HTTP part: the backlogged keys preloaded, then an
// open loop of p.Rate arrivals a second over p.Duration onto the cold keys
// (and, with bad, every groupsFailEvery-th onto the failing key, with the
// hanging key preloaded too).
func groupsCalls(ctx context.Context, f Factory, p Params, lim KeyLimits, bad bool) (*groupsRun, error) {
	srv := &groupsServer{open: make([]atomic.Int32, groupsKeys), peak: make([]atomic.Int32, groupsKeys)}
	up, err := startServer(p.Conc*2, srv)
	if err != nil {
		return nil, err
	}
	defer up.close()
	var blog breakerLog
	brk := groupsBreaker
	ex, err := f.Keyed(ctx, p, KeyedConfig{Conc: p.Conc, Queue: p.Queue, PerKey: lim, Breaker: &brk, OnBreaker: blog.add})
	if err != nil {
		return nil, fmt.Errorf("bench: new %s: %w", f.Name, err)
	}
	defer ex.Close()

	secs := p.Duration.Seconds()
	nRate := int(math.Ceil(groupsKeyRate * secs))
	nConc := int(math.Ceil(groupsKeyConc / groupsLongWork.Seconds() * secs))
	nHang := int(math.Ceil(groupsKeyConc / groupsHangTimeout.Seconds() * secs))
	nOpen := max(1, int(p.Rate*secs))
	total := groupsRateKeys*nRate + groupsConcKeys*nConc + nOpen
	if bad {
		total += nHang
	}
	run := &groupsRun{tasks: make([]groupsTask, total), bad: bad}
	_, run.breaker = ex.(breakerReporter)
	next := 0
	open := make([]atomic.Int32, groupsKeys)
	clientPeak := make([]atomic.Int32, groupsKeys)
	// others counts the tasks of the other keys not yet ended; allDone closes
	// when it reaches zero after the last submission (it starts at one for that).
	var others atomic.Int64
	others.Add(1)
	allDone := make(chan struct{})
	otherEnded := func() {
		if others.Add(-1) == 0 {
			close(allDone)
		}
	}
	base := time.Now()
	run.base = base

	// add makes task j of key, calling with mode after work.
	add := func(key int, due int64, mode string, work, timeout time.Duration) KeyedTask {
		tk := &run.tasks[next]
		next++
		*tk = groupsTask{key: key, due: due}
		guarded := key == keyFail
		if !guarded {
			others.Add(1)
		}
		path := up.url + keyName(key) + "?m=" + mode + "&d=" + strconv.FormatInt(int64(work), 10) + "&s="
		return KeyedTask{
			Key: keyName(key), Guarded: guarded, Timeout: timeout,
			Run: func(ctx context.Context) error {
				if !guarded {
					defer otherEnded()
				}
				now := int64(time.Since(base))
				tk.start, tk.called = now, true
				n := open[key].Add(1)
				defer open[key].Add(-1)
				for {
					m := clientPeak[key].Load()
					if n <= m || clientPeak[key].CompareAndSwap(m, n) {
						break
					}
				}
				tk.err = groupsGet(ctx, up.client, path+strconv.FormatInt(now, 10))
				return tk.err
			},
		}
	}
	submit := func(t KeyedTask) error {
		if err := ex.Submit(t); err != nil {
			return fmt.Errorf("bench: groups: submit to %s: %w", f.Name, err)
		}
		return nil
	}
	// The backlogs, interleaved so that every key starts at once.
	for i := range max(nRate, nConc, nHang) {
		due := int64(time.Since(base))
		for k := range groupsRateKeys {
			if i < nRate {
				if err := submit(add(keyRate0+k, due, "ok", p.Work, groupsTimeout)); err != nil {
					return nil, err
				}
			}
		}
		for k := range groupsConcKeys {
			if i < nConc {
				if err := submit(add(keyConc0+k, due, "ok", groupsLongWork, groupsTimeout)); err != nil {
					return nil, err
				}
			}
		}
		if bad && i < nHang {
			if err := submit(add(keyHang, due, "hang", 0, groupsHangTimeout)); err != nil {
				return nil, err
			}
		}
	}
	// The open loop: the cold keys in turn, and the failing key.
	t0 := time.Now()
	off := int64(t0.Sub(base))
	interval := 1e9 / p.Rate
	nCold := groupsKeys - keyCold0
	var subErr error
	err = OpenLoop(ctx, t0, nOpen, p.Rate, func(i int, _ time.Duration) {
		if subErr != nil {
			return
		}
		due := off + int64(float64(i)*interval)
		if i%groupsFailEvery == groupsFailEvery-1 {
			if bad {
				subErr = submit(add(keyFail, due, "fail", p.Work, groupsTimeout))
			}
			return
		}
		subErr = submit(add(keyCold0+i%nCold, due, "ok", p.Work, groupsTimeout))
	})
	otherEnded() // the last submission is made
	if d, ok := ex.(Dropper); ok && bad && err == nil && subErr == nil {
		// The failing key never recovers: its tasks that wait for its breaker
		// would wait for ever. Drop them groupsDrop after the others ended.
		select {
		case <-allDone:
		case <-time.After(10 * (p.Duration + groupsTimeout)): // a task lost: Wait below finds no end either
		case <-ctx.Done():
		}
		select {
		case <-time.After(groupsDrop):
		case <-ctx.Done():
		}
		d.DropGuarded()
	}
	ex.Wait()
	run.elapsed = time.Since(base)
	if err == nil {
		err = subErr
	}
	if err != nil {
		return nil, err
	}
	run.peak = make([]int32, groupsKeys)
	run.clientPeak = make([]int32, groupsKeys)
	for i := range groupsKeys {
		run.peak[i] = srv.peak[i].Load()
		run.clientPeak[i] = clientPeak[i].Load()
	}
	srv.mu.Lock()
	run.failSent = append([]int64(nil), srv.failSent...)
	srv.mu.Unlock()
	run.changes = blog.all()
	run.tasks = run.tasks[:next]
	return run, nil
}

// groupsGet calls url under ctx and wants a 200.
func groupsGet(ctx context.Context, c *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return errors.New("bench: upstream: " + resp.Status)
	}
	return nil
}

// coldWaits returns the waits (start minus intended arrival) of the cold
// keys' tasks that started.
func (r *groupsRun) coldWaits() []int64 {
	var w []int64
	for _, t := range r.tasks {
		if t.key >= keyCold0 && t.called {
			w = append(w, t.start-t.due)
		}
	}
	return w
}

// report puts the figures of r in out, the cold keys' waits aside.
func (r *groupsRun) report(out *Sample, p Params, lim KeyLimits) {
	m := out.Metrics
	var peak, peakClient int32
	for i := range groupsKeys {
		if i != keyHang {
			peak = max(peak, r.peak[i])
		}
		peakClient = max(peakClient, r.clientPeak[i])
	}
	m["key_conc_limit"] = float64(lim.Concurrency)
	m["max_conc_per_key"] = float64(peak)
	m["max_conc_per_key_client"] = float64(peakClient)
	m["max_conc_hang_key"] = float64(r.peak[keyHang])
	exact := 0.0
	if peak <= int32(lim.Concurrency) && peakClient <= int32(lim.Concurrency) {
		exact = 1
	}
	m["conc_exact"] = exact

	// Starts by key, in order.
	starts := make([][]int64, groupsKeys)
	var ok, timedOut, failed, ran int64
	for _, t := range r.tasks {
		if !t.called {
			continue
		}
		ran++
		starts[t.key] = append(starts[t.key], t.start)
		switch {
		case t.err == nil:
			ok++
		case errors.Is(t.err, context.DeadlineExceeded):
			timedOut++
		default:
			failed++
		}
	}
	iv := 1e9 / lim.Rate
	dev, excess, mean := 0.0, 0.0, 0.0
	for k, s := range starts {
		slices.Sort(s)
		d, e := rateDeviation(s, iv, groupsWindow)
		excess = max(excess, e)
		if k >= keyRate0 && k < keyRate0+groupsRateKeys {
			dev = max(dev, d)
			if n := len(s); n > 1 && s[n-1] > s[0] {
				mean = max(mean, math.Abs(float64(n-1)*iv/float64(s[n-1]-s[0])-1))
			}
		}
	}
	m["rate_dev_pct_max"] = dev * 100
	m["rate_excess_pct_max"] = excess * 100
	// The deviation of a backlogged key's rate over its whole backlog: a
	// systematic drift, which a stall of the process moves little.
	m["rate_mean_dev_pct_max"] = mean * 100
	m["ran"] = float64(ran)
	m["succeeded"] = float64(ok)
	m["timed_out"] = float64(timedOut)
	m["failed"] = float64(failed)
	m["not_run"] = float64(int64(len(r.tasks)) - ran)
	m["elapsed_ms"] = float64(r.elapsed.Microseconds()) / 1e3

	// The failing key: its calls, and those sent while its breaker was open.
	m["fail_key_calls"] = float64(len(r.failSent))
	if !r.breaker {
		return
	}
	name := keyName(keyFail)
	opened, total, most := 0, 0, 0
	for i, c := range r.changes {
		if c.Key != name || c.State != kernel.BreakerOpen {
			continue
		}
		opened++
		from, to := int64(c.Time.Sub(r.base)), int64(math.MaxInt64)
		for _, d := range r.changes[i+1:] {
			if d.Key == name && d.State != kernel.BreakerHalfOpen {
				to = int64(d.Time.Sub(r.base))
				break
			}
		}
		n := 0
		for _, s := range r.failSent {
			if s >= from && s < to {
				n++
			}
		}
		total += n
		most = max(most, n)
	}
	m["breaker_opened"] = float64(opened)
	m["breaker_probes"] = groupsProbes
	m["fail_calls_open"] = float64(total)
	m["fail_calls_open_max"] = float64(most)
}

// rateDeviation returns, over every window of at least w consecutive starts of
// sorted s, the largest relative deviation of the window's rate ((n-1) over its
// span) from 1/iv, and the largest excess above it (0 if none).
func rateDeviation(s []int64, iv float64, w int) (dev, excess float64) {
	for i := range s {
		for j := i + w - 1; j < len(s); j++ {
			span := float64(s[j] - s[i])
			if span <= 0 {
				return math.Inf(1), math.Inf(1)
			}
			r := float64(j-i) * iv / span
			dev = max(dev, math.Abs(r-1))
			excess = max(excess, r-1)
		}
	}
	return dev, excess
}
