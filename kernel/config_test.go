package kernel

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestConfigZeroIsValid(t *testing.T) {
	var c Config
	if err := c.Validate(); err != nil {
		t.Fatalf("Config{}.Validate() = %v, want nil", err)
	}
	r := c.withDefaults()
	if r.MaxConcurrency != maxConcurrencyDefault || r.Capacity.Normal != capacityNormalDefault || r.Tick != tickDefault {
		t.Fatalf("withDefaults() = %+v", r)
	}
	if r.Quotas.High != 17 || r.Quotas.Normal != 2 || r.Quotas.LowGuaranteed != 1 {
		t.Fatalf("default quotas = %+v, want 17/2/1 (85 %%, 10 %%, 5 %%)", r.Quotas)
	}
	if r.Retry.Low.MaxAttempts != retryMaxAttemptsDefault || r.MaxZombies != maxZombiesDefault {
		t.Fatalf("withDefaults() retry/zombies = %+v / %d", r.Retry.Low, r.MaxZombies)
	}
}

func TestConfigValidateNamesTheField(t *testing.T) {
	tests := []struct {
		name  string
		cfg   Config
		field string
		msg   string
	}{
		{"negative concurrency", Config{MaxConcurrency: -1}, "Config.MaxConcurrency", "kernel: Config.MaxConcurrency = -1: must be >= 0"},
		{"negative quota high", Config{Quotas: Quotas{High: -1}}, "Config.Quotas.High", ""},
		{"negative quota normal", Config{Quotas: Quotas{Normal: -2}}, "Config.Quotas.Normal", ""},
		{"negative quota low", Config{Quotas: Quotas{LowGuaranteed: -3}}, "Config.Quotas.LowGuaranteed", ""},
		{"negative reserve", Config{Reserve: Reserve{High: -1}}, "Config.Reserve.High", ""},
		{"reserve takes every slot", Config{MaxConcurrency: 4, Reserve: Reserve{High: 4}}, "Config.Reserve.High", "must be < MaxConcurrency (4)"},
		{"reserve over default", Config{Reserve: Reserve{High: 500}}, "Config.Reserve.High", ""},
		{"negative age", Config{AgeAfter: -time.Second}, "Config.AgeAfter", ""},
		{"negative capacity high", Config{Capacity: ByPriority[int]{High: -1}}, "Config.Capacity.High", ""},
		{"huge capacity normal", Config{Capacity: ByPriority[int]{Normal: capacityMax + 1}}, "Config.Capacity.Normal", ""},
		{"negative capacity low", Config{Capacity: ByPriority[int]{Low: -5}}, "Config.Capacity.Low", ""},
		{"degrade above one", Config{DegradeAt: 1.5}, "Config.DegradeAt", ""},
		{"degrade negative", Config{DegradeAt: -0.1}, "Config.DegradeAt", ""},
		{"degrade NaN", Config{DegradeAt: math.NaN()}, "Config.DegradeAt", ""},
		{"negative tick", Config{Tick: -1}, "Config.Tick", ""},
		{"tiny tick", Config{Tick: time.Microsecond}, "Config.Tick", ""},
		{"negative timeout high", Config{DefaultTimeout: ByPriority[time.Duration]{High: -1}}, "Config.DefaultTimeout.High", ""},
		{"negative timeout normal", Config{DefaultTimeout: ByPriority[time.Duration]{Normal: -1}}, "Config.DefaultTimeout.Normal", ""},
		{"negative timeout low", Config{DefaultTimeout: ByPriority[time.Duration]{Low: -1}}, "Config.DefaultTimeout.Low", ""},
		{"negative attempts", Config{Retry: ByPriority[RetryPolicy]{Low: RetryPolicy{MaxAttempts: -1}}}, "Config.Retry.Low.MaxAttempts", ""},
		{"negative base", Config{Retry: ByPriority[RetryPolicy]{High: RetryPolicy{Base: -1}}}, "Config.Retry.High.Base", ""},
		{"small multiplier", Config{Retry: ByPriority[RetryPolicy]{Normal: RetryPolicy{Multiplier: 0.5}}}, "Config.Retry.Normal.Multiplier", ""},
		{"infinite multiplier", Config{Retry: ByPriority[RetryPolicy]{Normal: RetryPolicy{Multiplier: math.Inf(1)}}}, "Config.Retry.Normal.Multiplier", ""},
		{"negative max", Config{Retry: ByPriority[RetryPolicy]{Normal: RetryPolicy{Max: -1}}}, "Config.Retry.Normal.Max", ""},
		{"bad jitter", Config{Retry: ByPriority[RetryPolicy]{Normal: RetryPolicy{Jitter: 9}}}, "Config.Retry.Normal.Jitter", ""},
		{"negative budget ratio", Config{RetryBudget: RetryBudget{Ratio: -1}}, "Config.RetryBudget.Ratio", ""},
		{"negative budget min", Config{RetryBudget: RetryBudget{MinPerSecond: -1}}, "Config.RetryBudget.MinPerSecond", ""},
		{"negative budget window", Config{RetryBudget: RetryBudget{Window: -1}}, "Config.RetryBudget.Window", ""},
		{"zombies below -1", Config{MaxZombies: -2}, "Config.MaxZombies", ""},
		{"negative grace", Config{ZombieGrace: -1}, "Config.ZombieGrace", ""},
		{"negative ontimeout workers", Config{OnTimeoutWorkers: -1}, "Config.OnTimeoutWorkers", ""},
		{"negative event buffer", Config{EventBuffer: -1}, "Config.EventBuffer", ""},
		{"name with a space", Config{Name: "a b"}, "Config.Name", ""},
		{"name with a quote", Config{Name: `a"b`}, "Config.Name", ""},
		{"name with a newline", Config{Name: "a\nb"}, "Config.Name", ""},
		{"name not ASCII", Config{Name: "caf\u00e9"}, "Config.Name", ""},
		{"name too long", Config{Name: strings.Repeat("a", nameMax+1)}, "Config.Name", "must be at most 64 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if err == nil {
				t.Fatalf("Validate() = nil, want an error naming %s", tt.field)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != tt.field {
				t.Fatalf("Validate() = %v, want a *ConfigError for %s", err, tt.field)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("Validate() = %q, want it to name %s", err, tt.field)
			}
			if tt.msg != "" && !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("Validate() = %q, want %q", err, tt.msg)
			}
			if _, err := New(tt.cfg); err == nil {
				t.Fatalf("New(%s) = nil error, want one", tt.name)
			}
		})
	}
}

func TestConfigValidateAcceptsNames(t *testing.T) {
	for _, name := range []string{"", "api", "api-1.east_2", "A.b-C_9", strings.Repeat("a", nameMax)} {
		if err := (&Config{Name: name}).Validate(); err != nil {
			t.Errorf("Config{Name: %q}.Validate() = %v, want nil", name, err)
		}
	}
}

func TestConfigValidateJoinsErrors(t *testing.T) {
	err := (&Config{MaxConcurrency: -1, Tick: -1, EventBuffer: -1}).Validate()
	for _, f := range []string{"Config.MaxConcurrency", "Config.Tick", "Config.EventBuffer"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("Validate() = %q, want it to name %s", err, f)
		}
	}
}

func TestTaskValidateNamesTheField(t *testing.T) {
	run := func(context.Context) error { return nil }
	tests := []struct {
		name  string
		task  Task
		field string
	}{
		{"nil run", Task{}, "Task.Run"},
		{"bad priority", Task{Run: run, Priority: 7}, "Task.Priority"},
		{"negative delay", Task{Run: run, Delay: -time.Second}, "Task.Delay"},
		{"delay and at", Task{Run: run, Delay: time.Second, At: time.Unix(1, 0)}, "Task.At"},
		{"negative timeout", Task{Run: run, Timeout: -1}, "Task.Timeout"},
		{"bad retry attempts", Task{Run: run, Retry: &RetryPolicy{MaxAttempts: -1}}, "Task.Retry.MaxAttempts"},
		{"bad retry multiplier", Task{Run: run, Retry: &RetryPolicy{Multiplier: 0.1}}, "Task.Retry.Multiplier"},
	}
	k := newTestKernel(t, Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := k.TrySubmit(tt.task)
			var ce *ConfigError
			if h != nil || !errors.As(err, &ce) || ce.Field != tt.field {
				t.Fatalf("TrySubmit() = %v, %v; want nil and a *ConfigError for %s", h, err, tt.field)
			}
			if err := k.TryGo(tt.task); err == nil {
				t.Fatalf("TryGo() = nil, want an error naming %s", tt.field)
			}
		})
	}
	if st := k.Stats(); st.ByPriority.Normal.Submitted != 0 {
		t.Fatalf("Stats().Submitted = %d after bad tasks, want 0", st.ByPriority.Normal.Submitted)
	}
}

func TestUpdateRefusesBadChanges(t *testing.T) {
	k := newTestKernel(t, Config{MaxConcurrency: 4})
	if err := k.Update(func(c *Config) { c.MaxConcurrency = -3 }); err == nil || !strings.Contains(err.Error(), "Config.MaxConcurrency") {
		t.Fatalf("Update(MaxConcurrency=-3) = %v, want an error naming Config.MaxConcurrency", err)
	}
	if err := k.Update(func(c *Config) { c.Tick = 5 * time.Millisecond }); err == nil || !strings.Contains(err.Error(), "Config.Tick") {
		t.Fatalf("Update(Tick) = %v, want an error naming Config.Tick", err)
	}
	if err := k.Update(func(c *Config) { c.Name = "b" }); err == nil || !strings.Contains(err.Error(), "Config.Name") {
		t.Fatalf("Update(Name) = %v, want an error naming Config.Name", err)
	}
	if got := k.rc.Load().cfg.MaxConcurrency; got != 4 {
		t.Fatalf("MaxConcurrency after refused updates = %d, want 4", got)
	}
	if err := k.Update(func(c *Config) { c.MaxConcurrency = 9; c.Quotas = Quotas{High: 3, Normal: 2, LowGuaranteed: 1} }); err != nil {
		t.Fatalf("Update(valid) = %v", err)
	}
	if got := k.rc.Load().cfg.MaxConcurrency; got != 9 {
		t.Fatalf("MaxConcurrency after update = %d, want 9", got)
	}
}
