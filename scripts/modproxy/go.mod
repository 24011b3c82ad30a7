module github.com/axsched/ax/scripts/modproxy

go 1.26.0

require golang.org/x/mod v0.37.0
