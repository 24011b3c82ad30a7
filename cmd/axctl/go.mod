module github.com/axsched/ax/cmd/axctl

go 1.26.0

require (
	github.com/axsched/ax v0.1.0
	github.com/axsched/ax/mysqlstore v0.1.0
	github.com/go-sql-driver/mysql v1.10.1
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/benbjohnson/clock v1.3.5 // indirect
)
