module example.com/repo

go 1.26.0
