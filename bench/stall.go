package bench

import "time"

// stallStep is the sleep of a stallMeter's goroutine.
const stallStep = time.Millisecond

// stallMeter measures how late the process wakes a goroutine that sleeps
// stallStep at a time: the stalls of the whole process (the OS holding its
// threads back on a shared machine, a GC pause), which delay every executor's
// starts alike, and which a scenario reports beside its tails so that a reader
// can tell them from the executor's own delays.
type stallMeter struct {
	stop, done chan struct{}
	start      time.Time
	max, total time.Duration // written by the goroutine until done closes
}

// startStallMeter starts a meter; end stops it.
func startStallMeter() *stallMeter {
	m := &stallMeter{stop: make(chan struct{}), done: make(chan struct{}), start: time.Now()}
	go func() {
		defer close(m.done)
		prev := m.start
		for {
			select {
			case <-m.stop:
				return
			default:
			}
			time.Sleep(stallStep)
			now := time.Now()
			if late := now.Sub(prev) - stallStep; late > 0 {
				m.max = max(m.max, late)
				m.total += late
			}
			prev = now
		}
	}()
	return m
}

// end stops m and returns the longest lateness of a wake-up, and the sum of
// the lateness as a share of the time m ran.
func (m *stallMeter) end() (longest time.Duration, share float64) {
	close(m.stop)
	<-m.done
	return m.max, float64(m.total) / float64(time.Since(m.start))
}
