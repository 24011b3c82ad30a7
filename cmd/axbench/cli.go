package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"

	"github.com/axsched/ax/bench"
)

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1 // a run failed, or an output could not be written
	exitUsage = 2 // bad flags
)

// registry returns every executor axbench knows: ax, the baselines and the
// peers, and the durable configurations.
func registry() (*bench.Registry, error) {
	reg := bench.NewRegistry()
	if err := reg.Add(peers()...); err != nil {
		return nil, err
	}
	if err := reg.Add(keyedBaseline()); err != nil {
		return nil, err
	}
	if err := reg.Add(gocronScheduler()); err != nil {
		return nil, err
	}
	if err := reg.Add(durableConfigs()...); err != nil {
		return nil, err
	}
	return reg, nil
}

// config is what the flags say.
type config struct {
	scenarios, execs []string
	params           bench.Params
	reps             int
	timeout          time.Duration
	jsonPath         string
	htmlPath         string
	quiet, list      bool
	profileDir       string
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	var scenario, execs string
	fs := flag.NewFlagSet("axbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&scenario, "scenario", "", "scenarios to run, comma-separated, or `all` (see -list)")
	fs.StringVar(&execs, "exec", "all", "executors, comma-separated, or `all` (see -list)")
	fs.IntVar(&c.params.N, "n", 0, "tasks per run (default: the scenario's, times -scale; saturation and flood count their arrivals over -duration instead)")
	fs.IntVar(&c.params.Conc, "conc", 0, "concurrency of every executor (default: the scenario's)")
	fs.IntVar(&c.params.Queue, "queue", 0, fmt.Sprintf("queue capacity of executors that queue (default %d)", bench.QueueDefault))
	fs.Float64Var(&c.params.Rate, "rate", 0, "open-loop arrivals per second (default: the scenario's; in saturation and flood, Low's)")
	fs.DurationVar(&c.params.Work, "work", 0, "duration of each task where tasks sleep (default: the scenario's; in saturation, Low's, with Normal's a tenth and High's a fiftieth; in flood, every priority's, spread ±50 %)")
	fs.DurationVar(&c.params.Duration, "duration", 0, "how long the arrivals of saturation and flood last (default: the scenario's, times -scale)")
	fs.Float64Var(&c.params.Scale, "scale", 0, "multiply the scenarios' default sizes and durations, e.g. 0.1 for a quick run (default 1)")
	fs.Float64Var(&c.params.Shrink, "shrink", 0, fmt.Sprintf("divide slow-upstream's delays and timeouts (default %d) and the firing intervals of schedules (1–60 s; default 40)", bench.ShrinkDefault))
	fs.Uint64Var(&c.params.Seed, "seed", 0, "seed of the random draws (default 1)")
	fs.IntVar(&c.reps, "reps", bench.RepsDefault, "repetitions of each scenario on each executor, each in a fresh process")
	fs.DurationVar(&c.timeout, "timeout", bench.RunTimeoutDefault, "limit of one repetition")
	fs.StringVar(&c.jsonPath, "json", "", "write the results as JSON to `FILE`")
	fs.StringVar(&c.htmlPath, "html", "", "write a self-contained HTML report with charts to `FILE`")
	fs.StringVar(&c.profileDir, "cpuprofile", "", "write a CPU profile of each repetition into `DIR` (SCENARIO-EXECUTOR-REP.pprof)")
	fs.BoolVar(&c.quiet, "quiet", false, "no progress bar")
	fs.BoolVar(&c.list, "list", false, "list the scenarios and executors, then exit")
	fs.Usage = func() {
		_, _ = fmt.Fprint(fs.Output(), "usage: axbench -scenario NAME[,NAME…]|all [flags]\n       axbench -list\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, usageError(fs, "unexpected argument %q", fs.Arg(0))
	}
	if c.list {
		return c, nil
	}
	if scenario == "" {
		return c, usageError(fs, "-scenario is required (axbench -list names the scenarios)")
	}
	c.scenarios = splitList(scenario)
	c.execs = splitList(execs)
	if len(c.scenarios) == 0 || len(c.execs) == 0 {
		return c, usageError(fs, "-scenario and -exec need at least one name")
	}
	if c.reps < 1 {
		return c, usageError(fs, "-reps %d: must be >= 1", c.reps)
	}
	if c.timeout <= 0 {
		return c, usageError(fs, "-timeout %v: must be > 0", c.timeout)
	}
	if err := c.params.Validate(); err != nil {
		return c, usageError(fs, "%s", strings.TrimPrefix(err.Error(), "bench: "))
	}
	return c, nil
}

// errUsage marks a usage error already printed.
var errUsage = errors.New("usage")

func usageError(fs *flag.FlagSet, format string, args ...any) error {
	_, _ = fmt.Fprintf(fs.Output(), "axbench: "+format+"\n", args...)
	_, _ = fmt.Fprintln(fs.Output(), "run 'axbench -h' for the flags")
	return errUsage
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// run is the whole program; it returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	reg, err := registry()
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "axbench:", err)
		return exitFail
	}
	if len(args) > 0 && args[0] == bench.ChildArg {
		if err := bench.ServeChild(ctx, reg, stdin, stdout); err != nil {
			_, _ = fmt.Fprintln(stderr, "axbench:", err)
			return exitFail
		}
		return exitOK
	}
	c, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		return exitUsage
	}
	if c.list {
		writeList(stdout, reg)
		return exitOK
	}
	opts := bench.Options{
		Scenarios: c.scenarios, Executors: c.execs, Params: c.params,
		Reps: c.reps, RunTimeout: c.timeout, Stderr: stderr, ProfileDir: c.profileDir,
	}
	if _, err := bench.NewPlan(reg, opts); err != nil {
		_, _ = fmt.Fprintf(stderr, "axbench: %s\nrun 'axbench -list' for the names\n", strings.TrimPrefix(err.Error(), "bench: "))
		return exitUsage
	}
	bar := newProgress(stderr, c.quiet)
	opts.Progress = bar.update
	total := 0
	if plans, err := bench.NewPlan(reg, opts); err == nil {
		for _, pl := range plans {
			total += c.reps * len(pl.Executors)
		}
	}
	bar.start(total)
	reports, err := bench.Run(ctx, reg, opts)
	bar.finish()
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "axbench:", err)
		return exitFail
	}
	return output(c, reports, stdout, stderr)
}

// output prints the tables and writes the files; a failed repetition makes
// the exit code exitFail once everything else is written.
func output(c config, reports []bench.Report, stdout, stderr io.Writer) int {
	code := exitOK
	if err := writeTables(stdout, reports); err != nil {
		_, _ = fmt.Fprintln(stderr, "axbench:", err)
		code = exitFail
	}
	if c.jsonPath != "" {
		if err := writeFile(c.jsonPath, func(w io.Writer) error { return writeJSON(w, reports) }); err != nil {
			_, _ = fmt.Fprintln(stderr, "axbench:", err)
			code = exitFail
		}
	}
	if c.htmlPath != "" {
		if err := writeFile(c.htmlPath, func(w io.Writer) error { return writeHTML(w, reports) }); err != nil {
			_, _ = fmt.Fprintln(stderr, "axbench:", err)
			code = exitFail
		}
	}
	for _, rp := range reports {
		for _, r := range rp.Results {
			if len(r.Errors) > 0 {
				code = exitFail
			}
		}
	}
	return code
}

// writeJSON writes one report as an object, several as an array of them.
func writeJSON(w io.Writer, reports []bench.Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if len(reports) == 1 {
		return enc.Encode(reports[0])
	}
	return enc.Encode(reports)
}

// writeFile writes path through a temporary file, so that a failed run leaves
// the previous file in place.
func writeFile(path string, write func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		_ = f.Close()
		_ = os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// writeList prints the scenarios and executors.
func writeList(w io.Writer, reg *bench.Registry) {
	t := table.NewWriter()
	t.SetOutputMirror(w)
	t.SetStyle(table.StyleLight)
	t.Style().Format.Header = text.FormatDefault
	t.AppendHeader(table.Row{"scenario", "what it measures"})
	t.SetColumnConfigs([]table.ColumnConfig{{Number: 2, WidthMax: 100}})
	for _, sc := range reg.Scenarios() {
		t.AppendRow(table.Row{sc.Name, sc.Doc})
	}
	t.Render()
	t = table.NewWriter()
	t.SetOutputMirror(w)
	t.SetStyle(table.StyleLight)
	t.Style().Format.Header = text.FormatDefault
	t.AppendHeader(table.Row{"executor", "mode", "priorities", "what it is"})
	t.SetColumnConfigs([]table.ColumnConfig{{Number: 4, WidthMax: 80}})
	for _, f := range reg.Executors() {
		pr := ""
		if f.Priorities {
			pr = "yes"
		}
		t.AppendRow(table.Row{f.Name, f.Mode.String(), pr, f.Doc})
	}
	t.Render()
}
