package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/axsched/ax/bench"
)

// progressAfter is how long a run goes on before the progress bar appears.
const progressAfter = 2 * time.Second

// progress shows a bar on a terminal for runs longer than progressAfter. It is
// silent when its writer is not a terminal or with -quiet.
type progress struct {
	w  io.Writer
	on bool // immutable: a terminal and not -quiet

	mu     sync.Mutex // guards the fields below
	bar    *progressbar.ProgressBar
	timer  *time.Timer
	done   int
	total  int
	last   string
	closed bool
}

// newProgress returns a progress display on w, enabled only when w is a
// terminal and quiet is false.
func newProgress(w io.Writer, quiet bool) *progress {
	return &progress{w: w, on: !quiet && isTerminal(w)}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// start arms the bar for a run of total repetitions.
func (p *progress) start(total int) {
	if !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total = total
	p.timer = time.AfterFunc(progressAfter, p.show)
}

// show creates the bar once the run has lasted progressAfter.
func (p *progress) show() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.bar != nil {
		return
	}
	p.bar = progressbar.NewOptions(p.total,
		progressbar.OptionSetWriter(p.w),
		progressbar.OptionSetDescription(p.last),
		progressbar.OptionShowCount(),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetWidth(30),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionThrottle(100*time.Millisecond),
	)
	_ = p.bar.Set(p.done)
}

// update records one finished repetition.
func (p *progress) update(pr bench.Progress) {
	if !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = pr.Done
	p.last = fmt.Sprintf("%s on %s, rep %d", pr.Scenario, pr.Executor, pr.Rep)
	if p.bar != nil {
		p.bar.Describe(p.last)
		_ = p.bar.Set(p.done)
	}
}

// finish removes the bar.
func (p *progress) finish() {
	if !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.timer != nil {
		p.timer.Stop()
	}
	if p.bar != nil {
		_ = p.bar.Finish()
		_ = p.bar.Clear()
	}
}
