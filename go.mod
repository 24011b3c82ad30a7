module github.com/axsched/ax

go 1.26.0

require (
	github.com/VictoriaMetrics/metrics v1.45.0
	github.com/benbjohnson/clock v1.3.5
	github.com/robfig/cron/v3 v3.0.1
	go.uber.org/goleak v1.3.0
	golang.org/x/sync v0.25.0
)

require (
	github.com/valyala/fastrand v1.1.0 // indirect
	github.com/valyala/histogram v1.2.0 // indirect
	golang.org/x/sys v0.38.0 // indirect
)
