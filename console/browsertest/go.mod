module github.com/axsched/ax/console/browsertest

go 1.26.0

require (
	github.com/axsched/ax v0.1.0
	github.com/axsched/ax/mysqlstore v0.1.0
	github.com/chromedp/cdproto v0.160.1
	github.com/chromedp/chromedp v0.23.1
	go.uber.org/goleak v1.3.0
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/VictoriaMetrics/metrics v1.45.0 // indirect
	github.com/benbjohnson/clock v1.3.5 // indirect
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	github.com/go-sql-driver/mysql v1.10.1 // indirect
	github.com/robfig/cron/v3 v3.0.1 // indirect
	github.com/valyala/fastrand v1.1.0 // indirect
	github.com/valyala/histogram v1.2.0 // indirect
	golang.org/x/sys v0.38.0 // indirect
)
