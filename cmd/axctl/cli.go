package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

// The exit statuses; docs/axctl.md lists them for scripts.
const (
	exitOK       = 0
	exitError    = 1 // the database or the console failed or could not be reached
	exitUsage    = 2 // a bad flag or argument, or a command the target does not serve
	exitNotFound = 3 // an unknown task or schedule
	exitRefused  = 4 // refused: by the console, by the operator at the prompt, or by the tasks' states
)

// cliError is an error with the exit status it ends axctl with.
type cliError struct {
	code int
	err  error
}

func (e *cliError) Error() string { return e.err.Error() }
func (e *cliError) Unwrap() error { return e.err }

// usagef returns a usage error (exit 2); its message should name the flag or
// argument.
func usagef(format string, a ...any) error {
	return &cliError{code: exitUsage, err: fmt.Errorf(format, a...)}
}

func notFoundf(format string, a ...any) error {
	return &cliError{code: exitNotFound, err: fmt.Errorf(format, a...)}
}

func refusedf(format string, a ...any) error {
	return &cliError{code: exitRefused, err: fmt.Errorf(format, a...)}
}

// exitCode is the exit status of err.
func exitCode(err error) int {
	var ce *cliError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ce):
		return ce.code
	case errors.Is(err, store.ErrUnknownTask), errors.Is(err, store.ErrUnknownSchedule):
		return exitNotFound
	}
	return exitError
}

// options are the flags: the global ones (every command takes them, before or
// after its name) and those of the commands.
type options struct {
	dsn, table, url, token string
	headers                headerFlag
	json                   bool
	width                  int
	timeout                time.Duration

	// the commands'
	state, kind, group, key, owner, priority string
	flow                                     string
	after, before                            string
	limit                                    int
	all, yes, stacks, listIndexes            bool
}

// headerFlag collects repeated --header "Name: value" flags.
type headerFlag []string

func (h *headerFlag) String() string { return strings.Join(*h, ", ") }

func (h *headerFlag) Set(v string) error {
	name, _, ok := strings.Cut(v, ":")
	if !ok || strings.TrimSpace(name) == "" || strings.ContainsAny(name, " \t") {
		return errors.New(`want "Name: value"`)
	}
	*h = append(*h, v)
	return nil
}

const (
	widthDefault = 100
	widthMin     = 40
	limitDefault = 50
	limitMax     = 1000
)

// globalDefaults are the global flags' defaults.
var globalDefaults = options{table: mysqlstore.TableDefault, width: widthDefault, timeout: 30 * time.Second}

// registerGlobal adds the global flags to fs, with the defaults def (the values
// given before the command's name, when fs is the command's).
func (o *options) registerGlobal(fs *flag.FlagSet, def *options) {
	fs.StringVar(&o.dsn, "dsn", def.dsn, "the database's go-sql-driver/mysql DSN (default $AXCTL_DSN)")
	fs.StringVar(&o.table, "table", def.table, "the store's task table (mysqlstore.Options.Table)")
	fs.StringVar(&o.url, "url", def.url, "a console's URL, where it is mounted (default $AXCTL_URL)")
	fs.StringVar(&o.token, "token", def.token, "the console's action token (default $AXCTL_TOKEN, else GET api/v1/token)")
	fs.Var(&o.headers, "header", `a header sent to the console, "Name: value" (repeatable)`)
	fs.BoolVar(&o.json, "json", def.json, "print JSON instead of a table")
	fs.IntVar(&o.width, "width", def.width, "the tables' width in columns")
	fs.DurationVar(&o.timeout, "timeout", def.timeout, "how long the command may take")
}

// command is one of axctl's commands.
type command struct {
	name    string // "dead requeue"
	args    string // its arguments, for the usage
	help    string
	min     int // arguments at least
	max     int // and at most (-1: any number)
	target  target
	flags   func(fs *flag.FlagSet, o *options)
	run     func(ctx context.Context, c *cli, args []string) error
	confirm bool // takes --yes
}

// target says which targets serve a command.
type target uint8

const (
	both    target = iota // the database and a console
	dbOnly                // the database only
	urlOnly               // a console only
)

// cli is one run's state.
type cli struct {
	o      options
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	client *http.Client // the console's; nil: http.DefaultClient
	getenv func(string) string
	b      backend // the target's, opened for the command
	parent context.Context
}

// withTimeout returns a context that ends --timeout from now (never with 0),
// under the run's: a command starts one afresh after waiting for the operator.
func (c *cli) withTimeout() (context.Context, context.CancelFunc) {
	if c.o.timeout > 0 {
		return context.WithTimeout(c.parent, c.o.timeout)
	}
	return context.WithCancel(c.parent)
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &cli{stdin: stdin, stdout: stdout, stderr: stderr, getenv: os.Getenv}
	return c.main(ctx, args)
}

// errWriter keeps the first error of its writes: a command writes its output
// and learns at the end whether it all went out (a closed pipe).
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

// outf and outln write to stdout; a failed write ends the command with an error.
func (c *cli) outf(format string, a ...any) { _, _ = fmt.Fprintf(c.stdout, format, a...) }
func (c *cli) outln(a ...any)               { _, _ = fmt.Fprintln(c.stdout, a...) }

// main parses args, runs the command and returns the exit status; errors go to
// stderr.
func (c *cli) main(ctx context.Context, args []string) int {
	ew := &errWriter{w: c.stdout}
	c.stdout = ew
	err := c.exec(ctx, args)
	if err == nil && ew.err != nil {
		err = fmt.Errorf("writing the output: %w", ew.err)
	}
	if err == nil {
		return exitOK
	}
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	_, _ = fmt.Fprintf(c.stderr, "axctl: %v\n", err)
	code := exitCode(err)
	if code == exitUsage {
		_, _ = fmt.Fprintln(c.stderr, "run 'axctl help' for the commands and flags")
	}
	return code
}

func (c *cli) exec(ctx context.Context, args []string) error {
	// The global flags before the command's name.
	gs := flag.NewFlagSet("axctl", flag.ContinueOnError)
	gs.SetOutput(io.Discard)
	c.o.registerGlobal(gs, &globalDefaults)
	if err := gs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.usage(c.stdout)
			return err
		}
		return usagef("%v", err)
	}
	rest := gs.Args()
	if len(rest) == 0 {
		c.usage(c.stderr)
		return usagef("no command given")
	}
	if rest[0] == "help" {
		c.usage(c.stdout)
		return nil
	}
	cmd, rest := lookup(rest)
	if cmd == nil {
		return usagef("unknown command %q", strings.Join(rest, " "))
	}
	fs := flag.NewFlagSet("axctl "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	given := c.o
	c.o.registerGlobal(fs, &given)
	if cmd.flags != nil {
		cmd.flags(fs, &c.o)
	}
	if cmd.confirm {
		fs.BoolVar(&c.o.yes, "yes", false, "do not ask for a confirmation")
	}
	pos, err := parseInterspersed(fs, rest)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.commandUsage(c.stdout, cmd, fs)
			return err
		}
		return usagef("%s: %v", cmd.name, err)
	}
	if len(pos) < cmd.min || (cmd.max >= 0 && len(pos) > cmd.max) {
		return usagef("%s: want %s, got %d argument(s)", cmd.name, argsWanted(cmd), len(pos))
	}
	if err := c.checkGlobal(); err != nil {
		return err
	}
	c.parent = ctx
	ctx, cancel := c.withTimeout()
	defer cancel()
	b, err := c.open(cmd)
	if err != nil {
		return err
	}
	c.b = b
	defer func() { _ = b.close() }()
	return cmd.run(ctx, c, pos)
}

func argsWanted(cmd *command) string {
	if cmd.args == "" {
		return "no arguments"
	}
	return cmd.args
}

// lookup finds the command args start with: its name is one or two words.
func lookup(args []string) (*command, []string) {
	for i := range commands {
		words := strings.Fields(commands[i].name)
		if len(args) >= len(words) && slices.Equal(args[:len(words)], words) {
			return &commands[i], args[len(words):]
		}
	}
	if len(args) > 1 {
		return nil, args[:2]
	}
	return nil, args
}

// parseInterspersed parses args with fs, flags and arguments in any order, and
// returns the arguments. After "--" everything is an argument.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		// fs.Parse stops at the first argument, or after a "--" it consumed.
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// checkGlobal checks the global flags and fills them in from the environment.
func (c *cli) checkGlobal() error {
	o := &c.o
	if o.dsn == "" && o.url == "" {
		o.dsn, o.url = c.getenv("AXCTL_DSN"), c.getenv("AXCTL_URL")
		if o.dsn != "" && o.url != "" {
			return usagef("both $AXCTL_DSN and $AXCTL_URL are set: choose one with --dsn or --url")
		}
	}
	if o.token == "" {
		o.token = c.getenv("AXCTL_TOKEN")
	}
	switch {
	case o.dsn != "" && o.url != "":
		return usagef("--dsn and --url: give one of them, not both")
	case o.dsn == "" && o.url == "":
		return usagef("--dsn or --url: give one (or set $AXCTL_DSN or $AXCTL_URL)")
	case o.width < widthMin:
		return usagef("--width = %d: must be at least %d", o.width, widthMin)
	case o.timeout < 0:
		return usagef("--timeout = %v: must not be negative", o.timeout)
	}
	return nil
}

// open opens the target cmd runs against.
func (c *cli) open(cmd *command) (backend, error) {
	if c.o.dsn != "" {
		if cmd.target == urlOnly {
			return nil, usagef("%s: needs --url: the figures live in a running kernel, served by its console", cmd.name)
		}
		return openDB(c.o.dsn, mysqlstore.Options{Table: c.o.table, ListIndexes: c.o.listIndexes})
	}
	if cmd.target == dbOnly {
		return nil, usagef("%s: needs --dsn: a console does not serve it", cmd.name)
	}
	return newWeb(c.o.url, c.o.token, c.o.headers, c.client)
}

// checkLimit checks --limit.
func (c *cli) checkLimit() error {
	if c.o.limit < 1 || c.o.limit > limitMax {
		return usagef("--limit = %d: must be between 1 and %d", c.o.limit, limitMax)
	}
	return nil
}

// confirm asks the operator on stderr whether to go on, unless --yes, and
// returns a refusal unless the answer is yes.
func (c *cli) confirm(question string) error {
	if c.o.yes {
		return nil
	}
	_, _ = fmt.Fprintf(c.stderr, "%s [y/N] ", question)
	var line []byte
	buf := make([]byte, 1)
	for {
		n, err := c.stdin.Read(buf)
		if n == 1 {
			if buf[0] == '\n' {
				break
			}
			line = append(line, buf[0])
			continue
		}
		if err != nil {
			break
		}
	}
	switch strings.ToLower(strings.TrimSpace(string(line))) {
	case "y", "yes":
		return nil
	}
	return refusedf("not confirmed: nothing changed (--yes skips the question)")
}
