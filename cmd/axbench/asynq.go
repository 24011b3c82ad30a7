package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/axsched/ax/bench"
)

// The Redis of the asynq configuration.
const (
	// redisAddrEnv names the variable holding the Redis address.
	redisAddrEnv = "AX_REDIS_ADDR"
	// redisAddrDefault is the address when redisAddrEnv is unset.
	redisAddrDefault = "127.0.0.1:6379"
	// asynqCheckInterval is asynq's TaskCheckInterval here, not its default of
	// 1 s, which idles the workers a second whenever the queue runs dry.
	asynqCheckInterval = time.Millisecond
	// asynqRetention keeps completed tasks, so that they can be counted.
	asynqRetention = time.Hour
)

// asynqConfig is hibiken/asynq on Redis, each run on a queue of its own,
// deleted after it.
func asynqConfig() bench.Factory {
	return bench.Factory{
		Name: "asynq-redis", Mode: bench.Blocking,
		Doc: "durable scenario only: hibiken/asynq on Redis at $" + redisAddrEnv + " (Enqueue, a loop of them for bulk; Concurrency conc; Retention keeps completed tasks); " +
			"done when the queue counts every task completed. Only as durable as the Redis's appendfsync",
		Durable: openAsynq,
	}
}

// asynqPeer is a started asynq server with its client.
type asynqPeer struct {
	opt       asynq.RedisClientOpt
	rdb       *redis.Client // the client's and the inspector's, and the cleanup's
	queue     string
	client    *asynq.Client
	srv       *asynq.Server
	inspector *asynq.Inspector
	runs      atomic.Int64
	acked     atomic.Int64
	// stopped is set once Drain stopped the server; read by close, after it.
	stopped bool
}

func openAsynq(ctx context.Context, p bench.Params) (*bench.DurableSetup, error) {
	addr, where := os.Getenv(redisAddrEnv), "$"+redisAddrEnv
	if addr == "" {
		addr, where = redisAddrDefault, "$"+redisAddrEnv+" (unset: "+redisAddrDefault+")"
	}
	a := &asynqPeer{
		opt:   asynq.RedisClientOpt{Addr: addr, DialTimeout: 5 * time.Second, PoolSize: 64},
		queue: fmt.Sprintf("axbench_%d_%d_%d", os.Getpid(), time.Now().Unix(), schemaSeq.Add(1)),
	}
	a.rdb = redis.NewClient(&redis.Options{Addr: addr, DialTimeout: a.opt.DialTimeout, PoolSize: a.opt.PoolSize})
	a.client = asynq.NewClientFromRedisClient(a.rdb)
	a.inspector = asynq.NewInspectorFromRedisClient(a.rdb)
	if err := a.client.Ping(); err != nil {
		_ = a.close()
		return nil, fmt.Errorf("no Redis at %s (set %s): %w", where, redisAddrEnv, err)
	}
	a.srv = asynq.NewServer(a.opt, asynq.Config{
		Concurrency:       p.Conc,
		Queues:            map[string]int{a.queue: 1},
		TaskCheckInterval: asynqCheckInterval,
		LogLevel:          asynq.FatalLevel,
	})
	if err := a.srv.Start(asynq.HandlerFunc(func(context.Context, *asynq.Task) error {
		a.runs.Add(1)
		return nil
	})); err != nil {
		_ = a.close()
		return nil, fmt.Errorf("asynq at %s: %w", where, err)
	}
	host, port := hostPort(addr)
	return &bench.DurableSetup{
		Peer: a, Succeeded: a.completed, Close: a.close,
		ServerCPU: serverCPU(redisAddrEnv, host, port, redisProcs),
	}, nil
}

func (a *asynqPeer) task(payload []byte) *asynq.Task {
	return asynq.NewTask("axbench_noop", payload, asynq.Queue(a.queue), asynq.Retention(asynqRetention), asynq.MaxRetry(0))
}

// SubmitMany enqueues one task after another: asynq has no batch enqueue.
func (a *asynqPeer) SubmitMany(ctx context.Context, payloads [][]byte) error {
	for _, p := range payloads {
		if _, err := a.client.EnqueueContext(ctx, a.task(p)); err != nil {
			return err
		}
		a.acked.Add(1)
	}
	return nil
}

func (a *asynqPeer) Submit(ctx context.Context, payload []byte) error {
	if _, err := a.client.EnqueueContext(ctx, a.task(payload)); err != nil {
		return err
	}
	a.acked.Add(1)
	return nil
}

// Drain waits until the queue counts every acknowledged task completed, then
// stops the server.
func (a *asynqPeer) Drain(ctx context.Context) error {
	if err := waitCompleted(ctx, a.acked.Load(), a.completed); err != nil {
		return err
	}
	a.srv.Shutdown()
	a.stopped = true
	return nil
}

func (a *asynqPeer) Executed() int64 { return a.runs.Load() }

func (a *asynqPeer) completed(context.Context) (int, error) {
	info, err := a.inspector.GetQueueInfo(a.queue)
	if err != nil {
		return 0, err
	}
	return info.Completed, nil
}

// close stops the server and deletes the queue with every key of it: asynq's
// DeleteQueue leaves completed tasks and statistics behind.
func (a *asynqPeer) close() error {
	var errs []error
	if a.srv != nil {
		if !a.stopped {
			a.srv.Shutdown()
		}
		if err := a.inspector.DeleteQueue(a.queue, true); err != nil && !errors.Is(err, asynq.ErrQueueNotFound) {
			errs = append(errs, err)
		}
		errs = append(errs, a.deleteKeys())
	}
	// The client and the inspector share rdb: closing it closes them.
	return errors.Join(append(errs, a.rdb.Close())...)
}

// deleteKeys unlinks every key of the run's queue.
func (a *asynqPeer) deleteKeys() error {
	ctx, cancel := context.WithTimeout(context.Background(), dropTimeout)
	defer cancel()
	it := a.rdb.Scan(ctx, 0, "asynq:{"+a.queue+"}*", 1000).Iterator()
	keys := make([]string, 0, 1000)
	flush := func() error {
		if len(keys) == 0 {
			return nil
		}
		err := a.rdb.Unlink(ctx, keys...).Err()
		keys = keys[:0]
		return err
	}
	for it.Next(ctx) {
		keys = append(keys, it.Val())
		if len(keys) == cap(keys) {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return errors.Join(it.Err(), flush())
}
